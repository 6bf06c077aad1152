"""Query windows: defaults, validation and the SERIES step ladder (DESIGN "Query semantics").

All times are epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from servemetrics.query.errors import WindowError
from servemetrics.timeutil import SECONDS_LOOKALIKE

HOUR_MS = 3_600_000
MAX_WINDOW_MS = 7 * 24 * HOUR_MS
CURRENT_LOOKBACK_MS = 5 * 60 * 1000
MAX_STEPS = 360
STEP_LADDER_S: tuple[int, ...] = (30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
"""SERIES steps in seconds; the smallest giving at most ``MAX_STEPS`` steps is used."""


class Mode(StrEnum):
    """Query mode (spec ``ModelMetricModeV1``)."""

    CURRENT = "CURRENT"
    SUMMARY = "SUMMARY"
    SERIES = "SERIES"


@dataclass(frozen=True)
class Window:
    """A resolved query window ``[start_ms, end_ms)`` (epoch ms) and the SERIES step in seconds (None in
    other modes)."""

    start_ms: int
    end_ms: int
    step_s: int | None

    @property
    def read_end_ms(self) -> int:
        """``end_ms + 1``: the exclusive end that includes the instant ``end_ms`` itself.

        CURRENT's window ``[now - 5 min, now]`` is closed: the latest sample may carry the timestamp
        ``now``, and a promotion at ``now`` already counts. So the serving timeline is read, and
        CURRENT's value set spans, up to here. SERIES and SUMMARY value sets end at ``end_ms`` and never
        look at a timeline entry at ``end_ms``, so reading the timeline this far changes nothing for them.
        """
        return self.end_ms + 1


def pick_step(duration_ms: int) -> int:
    """Return the smallest ladder step (seconds) that gives at most 360 steps over ``duration_ms``.

    1 h -> 30 s, 6 h -> 60 s, 24 h -> 300 s, 7 d -> 1800 s.
    """
    for step in STEP_LADDER_S:
        if -(-duration_ms // (step * 1000)) <= MAX_STEPS:
            return step
    return STEP_LADDER_S[-1]


def resolve_window(mode: Mode, start_ms: int | None, end_ms: int | None, now_ms: int) -> Window:
    """Apply defaults and validate a request window.

    - CURRENT: start and end must be omitted; the window is ``[now - 5 min, now]``.
    - Otherwise ``end`` defaults to ``now``, ``start`` to ``end - 1 h``; ``start < end`` and
      ``end - start <= 7 days`` are required.

    Raises:
        WindowError: with a message naming the bad parameter and how to fix it.
    """
    if mode is Mode.CURRENT:
        if start_ms is not None or end_ms is not None:
            raise WindowError(
                "mode CURRENT takes no start_epoch_millis or end_epoch_millis: omit them, "
                "or use mode SUMMARY or SERIES for a time range"
            )
        return Window(now_ms - CURRENT_LOOKBACK_MS, now_ms, None)
    for name, value in (("start_epoch_millis", start_ms), ("end_epoch_millis", end_ms)):
        if value is not None and value < SECONDS_LOOKALIKE:
            raise WindowError(
                f"{name}={value} is in 1970-1973: it looks like seconds; send epoch milliseconds "
                f"(13 digits, e.g. {value * 1000})"
            )
    end = now_ms if end_ms is None else end_ms
    start = end - HOUR_MS if start_ms is None else start_ms
    if start >= end:
        raise WindowError(f"start_epoch_millis ({start}) must be earlier than end_epoch_millis ({end})")
    if end - start > MAX_WINDOW_MS:
        raise WindowError(
            f"the window is {(end - start) / HOUR_MS:.1f} h long; it must not exceed 7 days "
            f"({MAX_WINDOW_MS} ms): move start_epoch_millis later or end_epoch_millis earlier"
        )
    step = pick_step(end - start) if mode is Mode.SERIES else None
    return Window(start, end, step)
