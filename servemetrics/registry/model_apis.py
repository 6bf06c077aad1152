"""The Model APIs part of the registry: teams of an organization and its Model APIs.

A team groups some of an organization's API keys (``api_keys.team_id``); a Model API is a shared
OpenAI-compatible endpoint named ``name`` (the ``model`` callers send), served by one environment (or one
deployment) of one of the organization's models, with rate limits per team in requests and tokens per
minute (``limits``: the team's own entry, else the default entry ``""``; None: no limit). Names are
unique inside an organization; another organization's Model API is never found (docs/model-apis.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.records import InvalidValue, NotFound

DEFAULT_TEAM = ""
"""The ``limits`` entry (and the ``team_id`` label value) of callers whose key has no team."""


@dataclass(frozen=True)
class RateLimits:
    """A team's limits on one Model API: requests and tokens (input + output) per minute; None: none."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class TeamInfo:
    """A team: its public id, display name and organization."""

    team_id: str
    name: str
    organization_id: int


@dataclass(frozen=True)
class ModelApiInfo:
    """A Model API as stored: served by ``environment`` of ``model_id`` or by ``deployment_id`` (one of
    the two is set); ``limits`` by team id (``DEFAULT_TEAM``: every team without its own entry);
    ``created_at_ms`` epoch ms (the platform's ``release_date`` and ``org_details.added_at``)."""

    name: str
    organization_id: int
    display_name: str
    description: str
    model_id: str
    environment: str | None
    deployment_id: str | None
    context_length: int
    limits: Mapping[str, RateLimits] = field(default_factory=dict)
    created_at_ms: int = 0

    def limits_of(self, team_id: str | None) -> RateLimits:
        """The limits in effect for a caller of team ``team_id`` (None: a key without a team): the team's
        own entry, else the default entry, else no limit."""
        found = self.limits.get(team_id or DEFAULT_TEAM)
        if found is None:
            found = self.limits.get(DEFAULT_TEAM, RateLimits())
        return found


def _limits_json(limits: Mapping[str, RateLimits]) -> dict[str, dict[str, int | None]]:
    return {
        team: {"requests_per_minute": lim.requests_per_minute, "tokens_per_minute": lim.tokens_per_minute}
        for team, lim in sorted(limits.items())
    }


def _model_api(r: Row[Any]) -> ModelApiInfo:
    limits = {team: RateLimits(**values) for team, values in (r.limits or {}).items()}
    return ModelApiInfo(
        r.name,
        r.organization_id,
        r.display_name,
        r.description,
        r.model_id,
        r.environment,
        r.deployment_id,
        r.context_length,
        limits,
        r.created_at_ms,
    )


def _check_refs(
    conn: Connection, org_id: int, org: str, name: str, model_id: str, limits: Mapping[str, RateLimits]
) -> None:
    """NotFound unless ``model_id`` is the organization's; InvalidValue for limits of unknown teams."""
    owner = conn.execute(select(t.models.c.organization_id).where(t.models.c.id == model_id)).first()
    if owner is None or owner.organization_id != org_id:
        raise NotFound(f"Model API {name!r}: no model {model_id!r} in organization {org!r}")
    known = rows.team_ids(conn, org_id)
    unknown = sorted(set(limits) - set(known) - {DEFAULT_TEAM})
    if unknown:
        raise InvalidValue(
            f"Model API {name!r} has limits for unknown teams {', '.join(unknown)}; "
            f"declare them under the organization's teams: {', '.join(known) or '(none)'}"
        )


class ModelApis:
    """Teams and Model APIs over a ``RegistryCore`` (every method its own transaction)."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    # -- teams ----------------------------------------------------------------------------------

    def ensure_team(self, organization: str, team_id: str, name: str | None = None) -> TeamInfo:
        """Create team ``team_id`` of ``organization`` or update its name (default: the id); NotFound
        if there is no such organization."""
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            where = (t.teams.c.organization_id == org_id) & (t.teams.c.team_id == team_id)
            if conn.execute(select(t.teams.c.id).where(where)).first():
                conn.execute(update(t.teams).where(where).values(name=name or team_id))
            else:
                conn.execute(
                    insert(t.teams).values(
                        organization_id=org_id,
                        team_id=team_id,
                        name=name or team_id,
                        created_at_ms=self._core.clock(),
                    )
                )
        return TeamInfo(team_id, name or team_id, org_id)

    def list_teams(self, organization_id: int) -> list[TeamInfo]:
        """The organization's teams, by id."""
        query = (
            select(t.teams).where(t.teams.c.organization_id == organization_id).order_by(t.teams.c.team_id)
        )
        with self._core.read() as conn:
            return [TeamInfo(r.team_id, r.name, r.organization_id) for r in conn.execute(query)]

    # -- Model APIs -----------------------------------------------------------------------------

    def put_model_api(
        self,
        organization: str,
        name: str,
        *,
        model_id: str,
        environment: str | None = None,
        deployment_id: str | None = None,
        display_name: str | None = None,
        description: str = "",
        context_length: int = 0,
        limits: Mapping[str, RateLimits] | None = None,
    ) -> ModelApiInfo:
        """Create or replace Model API ``name`` of ``organization``, served by ``environment`` of
        ``model_id`` (default ``production``) or by its deployment ``deployment_id``.

        Raises:
            NotFound: no such organization, or the model is not the organization's.
            InvalidValue: both ``environment`` and ``deployment_id`` given, or ``limits`` naming a team
                the organization does not have (the message lists its teams).
        """
        if environment is not None and deployment_id is not None:
            raise InvalidValue(f"Model API {name!r}: give environment or deployment, not both")
        if environment is None and deployment_id is None:
            environment = "production"
        limits = dict(limits or {})
        values = dict(
            display_name=display_name or name,
            description=description,
            model_id=model_id,
            environment=environment,
            deployment_id=deployment_id,
            context_length=context_length,
            limits=_limits_json(limits),
        )
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            _check_refs(conn, org_id, organization, name, model_id, limits)
            where = (t.model_apis.c.organization_id == org_id) & (t.model_apis.c.name == name)
            if conn.execute(select(t.model_apis.c.id).where(where)).first():
                conn.execute(update(t.model_apis).where(where).values(**values))
            else:
                conn.execute(
                    insert(t.model_apis).values(
                        organization_id=org_id, name=name, created_at_ms=self._core.clock(), **values
                    )
                )
        found = self.model_api(org_id, name)
        assert found is not None
        return found

    def model_api(self, organization_id: int, name: str) -> ModelApiInfo | None:
        """Model API ``name`` of the organization; None when it has none of that name."""
        query = select(t.model_apis).where(
            t.model_apis.c.organization_id == organization_id, t.model_apis.c.name == name
        )
        with self._core.read() as conn:
            row = conn.execute(query).first()
        return _model_api(row) if row else None

    def list_model_apis(self, organization_id: int) -> list[ModelApiInfo]:
        """The organization's Model APIs, by name."""
        query = (
            select(t.model_apis)
            .where(t.model_apis.c.organization_id == organization_id)
            .order_by(t.model_apis.c.name)
        )
        with self._core.read() as conn:
            return [_model_api(r) for r in conn.execute(query)]

    def prune_model_apis(self, organization: str, keep: Iterable[str]) -> int:
        """Delete the organization's Model APIs not named in ``keep`` (the config file's); returns how
        many were deleted (their series stay in the store). NotFound if there is no such organization."""
        kept = set(keep)
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            names = conn.execute(select(t.model_apis.c.name).where(t.model_apis.c.organization_id == org_id))
            gone = [r.name for r in names if r.name not in kept]
            if gone:
                conn.execute(
                    delete(t.model_apis).where(
                        t.model_apis.c.organization_id == org_id, t.model_apis.c.name.in_(gone)
                    )
                )
            return len(gone)
