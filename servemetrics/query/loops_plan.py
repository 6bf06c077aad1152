"""The trainer (Loops) metrics request, validated: window, step, request-volume unit and nodes.

Rules (spec ``loops-deployment-metrics.md``; DESIGN "Query semantics" for the window):

- ``end_epoch_millis`` defaults to now, ``start_epoch_millis`` to end - 1 h; start < end, at most 7 days.
- ``step_seconds``: when absent, the SERIES ladder step of the window (1 h -> 30 s, 24 h -> 5 min, 7 d ->
  30 min; ``windows.pick_step``), raised to ``scrape_step`` of the scrape interval when the interval is
  longer; when given, 1..604,800, at least the scrape interval (rounded up to whole seconds) and giving at
  most ``MAX_POINTS`` points. A step shorter than the scrape interval has no gauge sample in most points
  (counters are spread over their pairs and would read right, but memory, GPU and utilisation would be
  mostly gaps) (docs/loops.md "Step and scrape interval").
- ``time_divisor_seconds``: the unit of request volumes (60: requests per minute); default 1 (per second);
  1..604,800.
- Points (value sets) start at the window start and at every multiple of the step since the epoch inside
  the window; each spans until the next, the last until the window end (``value_sets.split_series``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servemetrics.query.errors import WindowError
from servemetrics.query.value_sets import split_series
from servemetrics.query.windows import STEP_LADDER_S, Mode, resolve_window
from servemetrics.store.base import ValueSet

MAX_POINTS = 11_000
"""Most points a series may have: Prometheus' ``query_range`` limit (11,000 points per series)."""
MAX_SECONDS = 7 * 86_400
"""Largest ``step_seconds`` and ``time_divisor_seconds`` accepted (7 days, the longest window)."""


class LoopsRequestError(WindowError):
    """A trainer metrics request the API answers with 400; the message says what to fix."""


@dataclass(frozen=True)
class LoopsNode:
    """A trainer node as the query needs it.

    Attributes:
        node_id: the ``node_id`` label of its series.
        leader: True for the leader node (the top-level compute fields are its values).
        gpu_ranks: the GPU ranks (DCGM ``gpu`` index) to report; empty: every rank in the data.
        pod, namespace: restrict kubelet series (CPU, memory, Summary API storage) to this pod.
        request_targets: URLs of the node's request sources; their ``up`` tells "no traffic" (0) from
            "no data" (a gap).
    """

    node_id: str
    leader: bool
    gpu_ranks: tuple[int, ...] = ()
    pod: str | None = None
    namespace: str | None = None
    request_targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopsPlan:
    """A validated request: trainer ``deployment_id``, its nodes (leader first), window (epoch ms),
    ``step_s``, ``divisor_s`` and the value sets (one per point)."""

    deployment_id: str
    nodes: tuple[LoopsNode, ...]
    start_ms: int
    end_ms: int
    step_s: int
    divisor_s: int
    value_sets: tuple[ValueSet, ...]


def _check_seconds(name: str, value: int | None) -> None:
    if value is not None and not 1 <= value <= MAX_SECONDS:
        raise LoopsRequestError(
            f"{name} must be a whole number of seconds from 1 to {MAX_SECONDS}, not {value}"
        )


def scrape_step(scrape_interval_s: float) -> int:
    """The smallest derived step (seconds) for a service scraping every ``scrape_interval_s`` seconds:
    the smallest SERIES ladder rung at or above the interval (30 s for any interval up to 30 s), or the
    interval rounded up to whole seconds when it exceeds the top rung (1 day)."""
    return next((rung for rung in STEP_LADDER_S if rung >= scrape_interval_s), math.ceil(scrape_interval_s))


def point_count(start_ms: int, end_ms: int, step_s: int) -> int:
    """How many points ``[start_ms, end_ms)`` has with step ``step_s``: the window start plus every
    multiple of the step strictly inside."""
    step_ms = step_s * 1000
    first = (start_ms // step_ms + 1) * step_ms
    return 1 + (max(0, -(-(end_ms - first) // step_ms)) if first < end_ms else 0)


def build_loops_plan(
    deployment_id: str,
    nodes: tuple[LoopsNode, ...],
    start_ms: int | None,
    end_ms: int | None,
    step_s: int | None,
    divisor_s: int | None,
    now_ms: int,
    *,
    scrape_interval_s: float,
) -> LoopsPlan:
    """Apply defaults and validate (see the module docstring).

    Args:
        start_ms, end_ms: the window, epoch ms (None: the defaults).
        step_s, divisor_s: ``step_seconds`` and ``time_divisor_seconds`` in seconds (None: the defaults).
        now_ms: now, epoch ms.
        scrape_interval_s: the service's scrape interval in seconds (the config's ``scrape_interval``):
            the least ``step_seconds`` accepted, and the floor of the derived step (``scrape_step``).

    Raises:
        WindowError: a bad window (``LoopsRequestError`` for a bad step or divisor); the API's 400.
    """
    _check_seconds("step_seconds", step_s)
    _check_seconds("time_divisor_seconds", divisor_s)
    least_step = math.ceil(scrape_interval_s)
    if step_s is not None and step_s < scrape_interval_s:
        raise LoopsRequestError(
            f"step_seconds={step_s} is shorter than the scrape interval ({scrape_interval_s:g} s): most "
            "points would hold no sample of the gauges (memory, GPU, utilisation), only gaps; "
            f"use step_seconds >= {least_step}, or omit step_seconds"
        )
    window = resolve_window(Mode.SERIES, start_ms, end_ms, now_ms)
    assert window.step_s is not None
    step = max(window.step_s, scrape_step(scrape_interval_s)) if step_s is None else step_s
    points = point_count(window.start_ms, window.end_ms, step)
    if points > MAX_POINTS:
        least = -(-(window.end_ms - window.start_ms) // ((MAX_POINTS - 1) * 1000))
        raise LoopsRequestError(
            f"step_seconds={step} gives {points} points over this window; at most {MAX_POINTS} are "
            f"allowed: use step_seconds >= {least}, a shorter window, or omit step_seconds"
        )
    value_sets = split_series(
        window.start_ms, window.end_ms, step, [(window.start_ms, frozenset({deployment_id}))]
    )
    return LoopsPlan(
        deployment_id, nodes, window.start_ms, window.end_ms, step, divisor_s or 1, tuple(value_sets)
    )
