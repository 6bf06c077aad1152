"""Time, named once: epoch-millisecond bounds, the wall clock, ISO 8601 rendering and the serving
timeline's shape. Every layer may import it (DESIGN "Query semantics": times are epoch ms).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

__all__ = [
    "MAX_EPOCH_MS",
    "MAX_TS_MS",
    "SECONDS_LOOKALIKE",
    "Timeline",
    "TimelineEntry",
    "iso_ms",
    "wall_clock_ms",
]

MAX_TS_MS = 7_258_118_400_000
"""2200-01-01T00:00:00Z in epoch ms: sample and window timestamps later than this are rejected."""

MAX_EPOCH_MS = 2**53 - 1
"""The largest epoch ms a JSON number holds exactly (the events list accepts up to it)."""

SECONDS_LOOKALIKE = 100_000_000_000
"""Epoch ms below this (1973-03-03) are taken for a client sending seconds and rejected."""

TimelineEntry = tuple[int, frozenset[str]]
"""``(from_ms, deployment ids serving from then on)``: one state of an environment's serving timeline."""

Timeline = Sequence[TimelineEntry]
"""An environment's serving timeline, sorted by ``from_ms`` (``registry.timeline`` builds it)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def wall_clock_ms() -> int:
    """Now, in integer epoch milliseconds."""
    return time.time_ns() // 1_000_000


def iso_ms(ms: int, *, always_millis: bool = True) -> str:
    """Epoch ``ms`` as RFC 3339 UTC with ``Z``.

    ``always_millis=True``: ``2026-03-01T12:00:00.000Z`` (the management API's timestamps);
    ``False``: ``2026-03-01T12:00:00Z``, ``.250Z`` only when the milliseconds are not 0 (the Loops
    trainer metrics' ``timestamp``, as the spec's example writes them).
    """
    when = _EPOCH + timedelta(milliseconds=ms)
    if always_millis:
        return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    frac = f".{ms % 1000:03d}" if ms % 1000 else ""
    return when.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
