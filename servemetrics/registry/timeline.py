"""Which deployments serve an environment over time, computed from its promotion history.

Pure functions over ``Change`` rows (no database). Rules:

- ``START`` of an instant promotion of D (or a rolling one at 100 %): from then on only D serves.
- ``START`` of a rolling promotion of D below 100 %: the deployments serving just before and D serve.
- A later step of that promotion reaching 100 % (``STEP`` 100 or ``ROLL_FORWARD``): only D.
- ``CANCEL`` / ``FORCE_CANCEL`` of it: only the deployments that served before it started.
- ``PAUSE``, ``RESUME`` and steps below 100 % change nothing. Steps of a promotion that a later one
  superseded, or that already ended, are ignored.
- ``INACTIVE``: the environment serves nothing until ``ACTIVE``; promotions still move its pointer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from servemetrics.timeutil import Timeline, TimelineEntry


@dataclass(frozen=True)
class Change:
    """One entry of an environment's history, ordered by ``(at_ms, order)``."""

    at_ms: int
    order: int
    action: str  # START STEP PAUSE RESUME CANCEL FORCE_CANCEL ROLL_FORWARD ACTIVE INACTIVE
    promotion_id: int = 0
    deployment_id: str = ""
    percent: int = 100
    rolling: bool = False


@dataclass
class _State:
    base: frozenset[str] = frozenset()
    active: bool = True
    promotion: int = 0
    new: str = ""
    previous: frozenset[str] = frozenset()

    def serving(self) -> frozenset[str]:
        return self.base if self.active else frozenset()

    def apply(self, c: Change) -> None:
        if c.action in ("ACTIVE", "INACTIVE"):
            self.active = c.action == "ACTIVE"
        elif c.action == "START":
            self._start(c)
        elif c.promotion_id == self.promotion and self.promotion:
            self._step(c)

    def _start(self, c: Change) -> None:
        if c.rolling and c.percent < 100:
            self.promotion, self.new, self.previous = c.promotion_id, c.deployment_id, self.base
            self.base = self.base | {c.deployment_id}
        else:
            self.promotion, self.base = 0, frozenset({c.deployment_id})

    def _step(self, c: Change) -> None:
        if c.action == "ROLL_FORWARD" or (c.action == "STEP" and c.percent >= 100):
            self.promotion, self.base = 0, frozenset({self.new})
        elif c.action in ("CANCEL", "FORCE_CANCEL"):
            self.promotion, self.base = 0, self.previous


def states(changes: Iterable[Change]) -> list[TimelineEntry]:
    """The serving set after each instant with changes, merged when a change leaves it equal."""
    state = _State()
    out: list[TimelineEntry] = []
    for c in sorted(changes, key=lambda c: (c.at_ms, c.order)):
        state.apply(c)
        serving = state.serving()
        if out and out[-1][0] == c.at_ms:
            out[-1] = (c.at_ms, serving)
        else:
            out.append((c.at_ms, serving))
    return _merge(out)


def _merge(timeline: Timeline) -> list[TimelineEntry]:
    merged: list[TimelineEntry] = []
    for at, serving in timeline:
        if not merged or merged[-1][1] != serving:
            merged.append((at, serving))
    return merged


def window(timeline: Timeline, start_ms: int, end_ms: int) -> list[TimelineEntry]:
    """Cut ``timeline`` to ``[start_ms, end_ms)``: first entry at ``start_ms``, then changes inside."""
    first: frozenset[str] = frozenset()
    inside: list[TimelineEntry] = []
    for at, serving in timeline:
        if at <= start_ms:
            first = serving
        elif at < end_ms:
            inside.append((at, serving))
    return _merge([(start_ms, first), *inside])
