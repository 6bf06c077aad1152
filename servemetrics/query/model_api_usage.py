"""Model API token usage in time buckets (``GET /v1/model_apis/usage``, platform-facts §3; the SDK's
``ModelApisUsageResponse``): the buckets of a window and the tokens and requests in each, grouped.

Usage is read from the counters the gateway writes (``catalog.model_apis``):
``baseten_model_api_tokens_total`` (by ``token_type``) and ``baseten_model_api_inference_requests_total``
(every answered call), both labelled by ``api_key`` (the key's public prefix) and ``team_id``; a bucket's
value is the counter's increase in it (the store's INCREASE: conserved, so buckets add up to the window).
Buckets are aligned on the epoch in UTC (a day starts at 00:00 UTC) and half-open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servemetrics.catalog.model_apis import PREFIX
from servemetrics.store.base import Reducer, Selection, Store, ValueSet

WIDTHS_MS: dict[str, int] = {"1m": 60_000, "1h": 3_600_000, "1d": 86_400_000}
"""``bucket_width`` -> milliseconds."""
LIMITS: dict[str, tuple[int, int]] = {"1d": (7, 31), "1h": (24, 168), "1m": (60, 1440)}
"""``bucket_width`` -> (default, maximum) buckets a page (platform-facts §3)."""
GROUPS = ("api_key", "model", "team")
"""The ``group_by`` dimensions answered (the SDK's ``user`` has no meaning here: no users)."""
_TOKEN_TYPES = ("input_cached", "input_uncached", "output")


@dataclass(frozen=True)
class UsageSource:
    """One Model API as usage reads it: its name, the model whose series it is, the deployments that
    may have served it (``""`` too: calls refused before a deployment was chosen)."""

    name: str
    model_id: str
    deployments: frozenset[str]


@dataclass(frozen=True)
class UsageRow:
    """One group's usage in one bucket; a dimension not grouped by is None."""

    api_key_prefix: str | None
    model: str | None
    team_id: str | None
    input_cached: int
    input_uncached: int
    output: int
    requests: int

    @property
    def total(self) -> int:
        """All tokens of the row (its order in a bucket: most first)."""
        return self.input_cached + self.input_uncached + self.output


def buckets(
    start_ms: int, end_ms: int, width_ms: int, limit: int
) -> tuple[list[tuple[int, int]], int | None]:
    """Up to ``limit`` buckets from ``start_ms`` snapped down to its bucket until ``end_ms`` (the last
    one ends at ``end_ms`` when that cuts it), and the start of the next page's first bucket (None:
    ``end_ms`` reached)."""
    at = start_ms - start_ms % width_ms
    out: list[tuple[int, int]] = []
    while at < end_ms and len(out) < limit:
        out.append((at, min(at + width_ms, end_ms)))
        at += width_ms
    return out, (at if at < end_ms else None)


Key = tuple[str | None, str | None, str | None]


def _wanted(value: str, only: frozenset[str] | None) -> bool:
    return only is None or value in only


def _key(group_by: Sequence[str], api_key: str, model: str, team: str) -> Key:
    return (
        api_key if "api_key" in group_by else None,
        model if "model" in group_by else None,
        team if "team" in group_by else None,
    )


def _order(r: UsageRow) -> tuple[int, int, str, str, str]:
    return (-r.total, -r.requests, str(r.api_key_prefix), str(r.model), str(r.team_id))


def usage(
    store: Store,
    sources: Sequence[UsageSource],
    spans: Sequence[tuple[int, int]],
    group_by: Sequence[str],
    api_keys: frozenset[str] | None = None,
    teams: frozenset[str] | None = None,
) -> list[list[UsageRow]]:
    """Per bucket of ``spans`` (epoch ms, half-open), its rows: one per group present (``group_by`` of
    ``GROUPS``), most tokens first; only the calls of keys in ``api_keys`` and teams in ``teams`` (None:
    all)."""
    acc: list[dict[Key, list[float]]] = [{} for _ in spans]
    for src in sources:
        sets = tuple(ValueSet(s, e, src.deployments) for s, e in spans)
        matchers = (("model_id", src.model_id), ("model_api", src.name))
        for name, extra in (("tokens_total", ("token_type",)), ("inference_requests_total", ())):
            res = store.select(
                Selection(PREFIX + name, Reducer.INCREASE, sets, ("api_key", "team_id", *extra), matchers)
            )
            for (api_key, team, *rest), cells in res.items():
                if not _wanted(api_key, api_keys) or not _wanted(team, teams):
                    continue
                column = _TOKEN_TYPES.index(rest[0]) if rest and rest[0] in _TOKEN_TYPES else 3
                if rest and column == 3:
                    continue  # a token type we do not know
                for i, cell in enumerate(cells):
                    if cell is not None:
                        row = acc[i].setdefault(_key(group_by, api_key, src.name, team), [0.0] * 4)
                        row[column] += cell.total
    out = []
    for groups in acc:
        rows = [UsageRow(*k, *(round(v) for v in values)) for k, values in groups.items()]
        rows = [r for r in rows if r.total or r.requests]  # a group without usage there is left out
        out.append(sorted(rows, key=_order))
    return out
