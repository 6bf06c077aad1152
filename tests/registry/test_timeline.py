"""The serving timeline rules on hand-written histories (no database)."""

from __future__ import annotations

from servemetrics.registry.timeline import Change, states, window

A, B, C = frozenset({"a"}), frozenset({"b"}), frozenset({"c"})


def _start(at: int, order: int, pid: int, dep: str, percent: int = 100) -> Change:
    return Change(at, order, "START", pid, dep, percent, rolling=percent < 100)


def test_instant_promotions() -> None:
    hist = [_start(1_000, 1, 1, "a"), _start(5_000, 2, 2, "b")]
    assert states(hist) == [(1_000, A), (5_000, B)]
    assert window(states(hist), 0, 10_000) == [(0, frozenset()), (1_000, A), (5_000, B)]
    assert window(states(hist), 2_000, 10_000) == [(2_000, A), (5_000, B)]
    assert window(states(hist), 1_000, 5_000) == [(1_000, A)]  # a change at end_ms is outside


def test_rolling_then_complete_then_cancelled_one() -> None:
    hist = [
        _start(1_000, 1, 1, "a"),
        _start(3_000, 2, 2, "b", 25),
        Change(4_000, 3, "STEP", 2, "b", 50, True),
        Change(6_000, 4, "STEP", 2, "b", 100, True),
        _start(8_000, 5, 3, "c", 10),
        Change(8_500, 6, "PAUSE", 3, "c", 10, True),
        Change(9_000, 7, "CANCEL", 3, "c", 0, True),
    ]
    assert states(hist) == [(1_000, A), (3_000, A | B), (6_000, B), (8_000, B | C), (9_000, B)]


def test_superseded_promotion_steps_are_ignored_and_deactivation_empties() -> None:
    hist = [
        _start(1_000, 1, 1, "a"),
        _start(2_000, 2, 2, "b", 50),
        _start(3_000, 3, 3, "c", 100),  # supersedes b's promotion
        Change(4_000, 4, "STEP", 2, "b", 100, True),  # ignored
        Change(5_000, 5, "INACTIVE"),
        Change(6_000, 6, "ACTIVE"),
    ]
    assert states(hist) == [(1_000, A), (2_000, A | B), (3_000, C), (5_000, frozenset()), (6_000, C)]


def test_same_instant_changes_keep_the_last_state() -> None:
    hist = [_start(1_000, 1, 1, "a"), _start(1_000, 2, 2, "b")]
    assert window(states(hist), 0, 2_000) == [(0, frozenset()), (1_000, B)]
