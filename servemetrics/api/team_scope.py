"""Who reads which team's Model API series (docs/model-apis.md "Who sees what"): the one place of that
rule, for the Model API routes (``team_scope``) and the model routes (``no_other_teams``)."""

from __future__ import annotations

from servemetrics.api.errors import bad_request, forbidden
from servemetrics.catalog.model_apis import PREFIX as MODEL_API_PREFIX
from servemetrics.catalog.splits import Split
from servemetrics.registry import KeyInfo, team_bound
from servemetrics.store.base import GroupKey


def team_scope(key: KeyInfo, requested: list[str], known: list[str]) -> frozenset[GroupKey] | None:
    """The teams whose series ``key`` reads (as the ``team`` split's parts; None: every team): a
    managing key (``WORKSPACE_MANAGE_ALL``, ``PERSONAL``) or a key without a team sees the whole
    organization, or the ``requested`` teams; a key of a team sees its team only.

    Raises:
        ApiError: 400 a requested team the organization does not have (naming its teams); 403 a team
            key asking for another team.
    """
    unknown = [t for t in requested if t not in known]
    if unknown:
        raise bad_request(
            f"team_ids: no team {', '.join(map(repr, unknown))} in your organization; use some of: "
            f"{', '.join(known) or '(none)'}"
        )
    team = team_bound(key)
    if team is None:
        return frozenset((t,) for t in requested) if requested else None
    if any(t != team for t in requested):
        raise forbidden(
            f"a key of team {team!r} reads only its team's series; leave team_ids out or send "
            f"team_ids[]={team}"
        )
    return frozenset({(team,)})


def no_other_teams(key: KeyInfo, group_by: Split | None, metrics: list[str] | None) -> None:
    """403 when a team's key (``registry.team_bound``) asks a model route for Model API series or the
    team split: these routes read every team's series; ``GET /v1/model_apis/{name}/metrics`` reads its
    team's (docs/model-apis.md "Who sees what")."""
    team = team_bound(key)
    if team is None:
        return
    if group_by is Split.TEAM or any(m.startswith(MODEL_API_PREFIX) for m in metrics or ()):
        raise forbidden(
            f"a key of team {team!r} reads Model API series through GET /v1/model_apis/{{name}}/metrics, "
            "which answers its team's; the model routes answer every team's"
        )
