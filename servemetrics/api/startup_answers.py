"""The startup routes' answers, as the platform's SDK (``baseten`` 0.13.1) models them: ``StartupAttempts``
(a page of ``StartupAttempt``) and ``StartupSummary``, computed from the registry's attempts
(``registry.startup_marks.Attempt``) of the window's 1,000 most recent (docs/management.md "Startup
times").

Listing: attempts still starting are left out (they have no outcome yet); then the filters (``outcomes``,
``phase``: more than 0 ms spent in it, or in it when the attempt ended; ``min_duration_ms``; ``search``:
the replica id exactly or the deployment name containing the text, any case), then the order
(``sort_by`` STARTED_AT (default), READY_AT, DURATION or OUTCOME, ``direction`` desc (default) or asc;
attempts never ready sort last by READY_AT either way; ties by start, then id) and the page: ``limit``
items after ``cursor``. The cursor is the sort key of the page's last item (keyset paging: attempts that
start meanwhile do not shift the pages), so it is only valid with the same sort.

Summary: ``total_duration_ms`` over the successful attempts (start to ready), ``phase_duration_ms`` per
phase over its completed spans, phases in their startup order; mean rounded to the millisecond,
percentiles by nearest rank (the smallest value with at least q of the values at or below it), all
null with ``sample_count`` 0 when there are none.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servemetrics.api.errors import bad_request
from servemetrics.registry.startup_marks import OUTCOMES, PHASE_NAMES, Attempt

SORTS = ("STARTED_AT", "READY_AT", "DURATION", "OUTCOME")
DIRECTIONS = ("asc", "desc")
PERCENTILES = (("p50_ms", 0.5), ("p90_ms", 0.9), ("p95_ms", 0.95), ("p99_ms", 0.99))
SortKey = tuple[int, Any, int, int]
"""(1 when the sorted field is null else 0, its value, started at ms, id)."""


@dataclass(frozen=True)
class StartupQuery:
    """What one startup request asks (validated by ``check``; times epoch ms).

    Attributes:
        start_ms, end_ms: the window: attempts that started in ``[start_ms, end_ms)``.
        min_duration_ms: only attempts lasting at least this long (None: any).
        outcomes: only these outcomes (empty: any); phase: only attempts that spent time in it.
        search: replica id (exact) or deployment name (substring, any case); None: any.
        sort_by, direction: the order (``SORTS``, ``DIRECTIONS``); limit: items per page; cursor: the
            previous page's ``pagination.cursor``.
    """

    start_ms: int
    end_ms: int
    min_duration_ms: int | None = None
    outcomes: tuple[str, ...] = ()
    phase: str | None = None
    search: str | None = None
    sort_by: str = "STARTED_AT"
    direction: str = "desc"
    limit: int = 50
    cursor: str | None = None

    def check(self) -> StartupQuery:
        """Itself when every value is allowed; else ApiError 400 saying which and what to send."""
        if self.start_ms >= self.end_ms:
            raise bad_request("end_epoch_millis must be after start_epoch_millis")
        _one_of("outcomes", self.outcomes, OUTCOMES)
        _one_of("phase", (self.phase,) if self.phase else (), PHASE_NAMES)
        _one_of("sort_by", (self.sort_by,), SORTS)
        _one_of("direction", (self.direction,), DIRECTIONS)
        return self


def _one_of(name: str, values: Sequence[str], allowed: Sequence[str]) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise bad_request(f"{name} {', '.join(bad)} is not one of {', '.join(allowed)}")


def _resolved(attempts: Sequence[Attempt], now_ms: int, stall_ms: int) -> list[tuple[Attempt, str]]:
    """The attempts with an outcome, each with it (those still starting are left out)."""
    out = []
    for a in attempts:
        outcome = a.outcome(now_ms, stall_ms)
        if outcome is not None:
            out.append((a, outcome))
    return out


def _spent_in(a: Attempt, phase: str) -> bool:
    """Whether the attempt spent more than 0 ms in ``phase`` (or ended in it)."""
    return any(p.phase == phase and (p.duration_ms is None or p.duration_ms > 0) for p in a.phases())


def _matches(a: Attempt, outcome: str, q: StartupQuery, now_ms: int) -> bool:
    if q.outcomes and outcome not in q.outcomes:
        return False
    if q.min_duration_ms is not None and a.duration_ms(now_ms) < q.min_duration_ms:
        return False
    if q.phase and not _spent_in(a, q.phase):
        return False
    if q.search:
        return a.replica == q.search or q.search.lower() in a.deployment_name.lower()
    return True


def _sort_key(a: Attempt, outcome: str, sort_by: str, now_ms: int) -> SortKey:
    value: Any = {
        "STARTED_AT": a.started_at_ms,
        "READY_AT": a.ready_at_ms,
        "DURATION": a.duration_ms(now_ms),
        "OUTCOME": outcome,
    }[sort_by]
    return (1, 0, a.started_at_ms, a.id) if value is None else (0, value, a.started_at_ms, a.id)


def _after(key: SortKey, cursor: SortKey, descending: bool) -> bool:
    """Whether ``key`` comes after ``cursor`` in the order (nulls last in either direction)."""
    if key[0] != cursor[0]:
        return key[0] > cursor[0]
    return key[1:] < cursor[1:] if descending else key[1:] > cursor[1:]


Item = tuple[Attempt, str, SortKey]
"""An attempt, its outcome and its sort key."""


def _ordered(items: list[Item], descending: bool) -> list[Item]:
    items = sorted(items, key=lambda i: i[2][1:], reverse=descending)
    return sorted(items, key=lambda i: i[2][0])  # stable: nulls last, the order above kept


def encode_cursor(key: SortKey, q: StartupQuery) -> str:
    """The opaque cursor of a page whose last item has sort key ``key``."""
    raw = json.dumps([q.sort_by, q.direction, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, q: StartupQuery) -> SortKey:
    """The sort key in ``cursor``; ApiError 400 when it is not one of ours or was made for another sort."""
    try:
        sort_by, direction, null, value, started, ident = json.loads(
            base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        )
    except (ValueError, TypeError, binascii.Error):
        raise bad_request("cursor is not one this endpoint returned; omit it for the first page") from None
    if (sort_by, direction) != (q.sort_by, q.direction):
        raise bad_request(
            f"cursor was returned for sort_by={sort_by}&direction={direction}; pass the same sort and filters"
        )
    return (int(null), value, int(started), int(ident))


def attempt_v1(a: Attempt, outcome: str, now_ms: int, environment: str | None) -> dict[str, Any]:
    """``StartupAttempt``."""
    return {
        "model_id": a.model_id,
        "deployment_id": a.deployment_id,
        "deployment_name": a.deployment_name,
        "environment_name": environment,
        "replica_id": a.replica,
        "started_at_epoch_millis": a.started_at_ms,
        "ready_at_epoch_millis": a.ready_at_ms,
        "duration_ms": a.duration_ms(now_ms),
        "outcome": outcome,
        "phase_summary": [
            {"phase": p.phase, "status": p.status, "offset_ms": p.offset_ms, "duration_ms": p.duration_ms}
            for p in a.phases()
        ],
    }


def attempts_page(
    attempts: Sequence[Attempt], q: StartupQuery, now_ms: int, stall_ms: int, environment: str | None
) -> dict[str, Any]:
    """``StartupAttempts``: one page of the attempts (the window's most recent, newest first) that pass
    ``q``'s filters, in its order, after its cursor; ``environment``: the environment asked about, or
    None for a deployment."""
    descending = q.direction == "desc"
    items = [
        (a, outcome, _sort_key(a, outcome, q.sort_by, now_ms))
        for a, outcome in _resolved(attempts, now_ms, stall_ms)
        if _matches(a, outcome, q, now_ms)
    ]
    ordered = _ordered(items, descending)
    if q.cursor is not None:
        cursor = decode_cursor(q.cursor, q)
        ordered = [i for i in ordered if _after(i[2], cursor, descending)]
    page, more = ordered[: q.limit], len(ordered) > q.limit
    return {
        "items": [attempt_v1(a, outcome, now_ms, environment) for a, outcome, _ in page],
        "pagination": {"has_more": more, "cursor": encode_cursor(page[-1][2], q) if more else None},
        "total_count": len(items),
    }


def percentiles(values: Sequence[int]) -> dict[str, Any]:
    """``StartupPercentiles`` of ``values`` (ms): count, mean (rounded half up) and nearest-rank
    percentiles; nulls for no values."""
    n = len(values)
    if not n:
        return {"sample_count": 0, "mean_ms": None, **{name: None for name, _ in PERCENTILES}}
    ordered = sorted(values)
    ranks = {name: ordered[max(1, math.ceil(q * n)) - 1] for name, q in PERCENTILES}
    return {"sample_count": n, "mean_ms": math.floor(sum(ordered) / n + 0.5), **ranks}


def summary(attempts: Sequence[Attempt], q: StartupQuery, now_ms: int, stall_ms: int) -> dict[str, Any]:
    """``StartupSummary`` of the attempts (the window's most recent) lasting at least
    ``q.min_duration_ms`` (module docstring: what each distribution holds)."""
    kept = [
        (a, o)
        for a, o in _resolved(attempts, now_ms, stall_ms)
        if q.min_duration_ms is None or a.duration_ms(now_ms) >= q.min_duration_ms
    ]
    phases: dict[str, list[int]] = {}
    for a, _ in kept:
        for p in a.phases():
            if p.duration_ms is not None:
                phases.setdefault(p.phase, []).append(p.duration_ms)
    return {
        "start_epoch_millis": q.start_ms,
        "end_epoch_millis": q.end_ms,
        "total_duration_ms": percentiles([a.duration_ms(now_ms) for a, o in kept if o == "SUCCESS"]),
        "phase_duration_ms": [
            {"phase": name, "duration_ms": percentiles(phases[name])}
            for name in PHASE_NAMES
            if name in phases
        ],
    }
