"""Split a window into value sets: grid points and promotion instants (DESIGN "Query semantics").

A serving timeline is a sorted list of ``(instant_ms, deployment_ids)``: from each instant on, those
deployments serve the environment (``Environments.serving_timeline``). Value sets start at the window start,
at every multiple of the step inside the window and at every timeline instant inside the window; each
spans until the next start, the last until the window end.
"""

from __future__ import annotations

import bisect

from servemetrics.store.base import ValueSet
from servemetrics.timeutil import Timeline


def serving_at(timeline: Timeline, t_ms: int) -> frozenset[str]:
    """Deployments serving at ``t_ms`` (the latest timeline entry at or before it), or empty."""
    i = bisect.bisect_right([t for t, _ in timeline], t_ms)
    return timeline[i - 1][1] if i else frozenset()


def serving_during(timeline: Timeline, start_ms: int, end_ms: int) -> frozenset[str]:
    """Deployments serving at any time in ``[start_ms, end_ms)``."""
    out = set(serving_at(timeline, start_ms))
    for t, deps in timeline:
        if start_ms < t < end_ms:
            out |= deps
    return frozenset(out)


def split_series(start_ms: int, end_ms: int, step_s: int, timeline: Timeline) -> list[ValueSet]:
    """SERIES value sets over ``[start_ms, end_ms)`` with grid step ``step_s`` seconds."""
    step_ms = step_s * 1000
    starts = {start_ms}
    first = (start_ms // step_ms + 1) * step_ms
    starts.update(range(first, end_ms, step_ms))
    starts.update(t for t, _ in timeline if start_ms < t < end_ms)
    ordered = sorted(starts)
    bounds = ordered[1:] + [end_ms]
    return [ValueSet(s, e, serving_at(timeline, s)) for s, e in zip(ordered, bounds, strict=True)]


def whole_window(start_ms: int, end_ms: int, timeline: Timeline) -> list[ValueSet]:
    """One value set over the window, with every deployment that served during it (SUMMARY, CURRENT)."""
    return [ValueSet(start_ms, end_ms, serving_during(timeline, start_ms, end_ms))]
