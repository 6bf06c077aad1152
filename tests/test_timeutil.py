"""The one time helper module: ISO 8601 rendering of epoch ms in its two forms, and the clock."""

from __future__ import annotations

import time

from servemetrics.timeutil import iso_ms, wall_clock_ms

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def test_timestamps_are_iso_8601_utc_step_starts():
    """The Loops trainer metrics' form (moved from tests/loops/test_query.py): ms only when not 0."""
    assert iso_ms(T0, always_millis=False) == "2026-01-01T00:00:00Z"
    assert iso_ms(T0 + 30_250, always_millis=False) == "2026-01-01T00:00:30.250Z"


def test_management_timestamps_always_carry_milliseconds():
    assert iso_ms(T0) == "2026-01-01T00:00:00.000Z"
    assert iso_ms(T0 + 30_250) == "2026-01-01T00:00:30.250Z"
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"


def test_wall_clock_is_epoch_milliseconds():
    before = time.time_ns() // 1_000_000
    now = wall_clock_ms()
    assert before <= now <= time.time_ns() // 1_000_000
