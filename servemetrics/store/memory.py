"""``MemoryStore``: the reference ``Store``, plain Python over sorted per-series arrays.

Slow and simple on purpose: every other backend must give the same answers on the same data
(conformance tests). Semantics are those of ``servemetrics.store.base``.
"""

from __future__ import annotations

import bisect
import math

from servemetrics.samples import SampleBatch
from servemetrics.store.base import (
    Cell,
    GroupKey,
    Reducer,
    Selection,
    SelectResult,
    StoreStats,
    ValueSet,
    check_value_sets,
    in_value_set,
)
from servemetrics.types import Labels, Matchers, SeriesKey


class _Series:
    __slots__ = ("ts", "values")

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.values: list[float] = []

    def add(self, ts: int, value: float) -> bool:
        if not self.ts or ts > self.ts[-1]:
            self.ts.append(ts)
            self.values.append(value)
            return True
        i = bisect.bisect_left(self.ts, ts)
        if i < len(self.ts) and self.ts[i] == ts:
            return False  # first write wins
        self.ts.insert(i, ts)
        self.values.insert(i, value)
        return True


def _increase(s: _Series, lo: int, hi: int, lookback: int) -> float | None:
    i = bisect.bisect_left(s.ts, lo)
    j = bisect.bisect_left(s.ts, hi)
    if i == j:
        return None
    total = 0.0
    for k in range(i, j):
        if k == 0 or s.ts[k - 1] < lo - lookback:
            continue
        prev, cur = s.values[k - 1], s.values[k]
        total += cur - prev if cur >= prev else cur
    return total


def _mean(s: _Series, lo: int, hi: int) -> float | None:
    i = bisect.bisect_left(s.ts, lo)
    j = bisect.bisect_left(s.ts, hi)
    if i == j:
        return None
    return math.fsum(s.values[i:j]) / (j - i)


def _last(s: _Series, hi: int, lookback: int) -> float | None:
    j = bisect.bisect_left(s.ts, hi)
    if j == 0 or s.ts[j - 1] < hi - lookback:
        return None
    return s.values[j - 1]


def _reduce(s: _Series, sel: Selection, vs: ValueSet) -> float | None:
    if sel.reducer is Reducer.INCREASE:
        return _increase(s, vs.start_ms, vs.end_ms, sel.lookback_ms)
    if sel.reducer is Reducer.MEAN:
        return _mean(s, vs.start_ms, vs.end_ms)
    return _last(s, vs.end_ms, sel.lookback_ms)


class MemoryStore:
    """An in-memory ``Store`` (the reference implementation for tests)."""

    def __init__(self) -> None:
        self._series: dict[SeriesKey, _Series] = {}
        self._by_name: dict[str, list[Labels]] = {}

    def append(self, batch: SampleBatch) -> int:
        """Store ``batch``; return how many samples were new (first write wins per series and ts)."""
        added = 0
        for name, labels, value, ts in batch.samples():
            series = self._series.get((name, labels))
            if series is None:
                series = self._series[(name, labels)] = _Series()
                self._by_name.setdefault(name, []).append(labels)
            added += series.add(int(ts), float(value))
        return added

    def select(self, selection: Selection) -> SelectResult:
        """Evaluate ``selection`` (semantics in ``servemetrics.store.base``)."""
        check_value_sets(selection.value_sets)
        out: dict[GroupKey, list[Cell | None]] = {}
        matchers = dict(selection.matchers)
        for labels in self._by_name.get(selection.name, []):
            lab = dict(labels)
            if any(lab.get(k) != v for k, v in matchers.items()):
                continue
            key = tuple(lab.get(g, "") for g in selection.group_by)
            series = self._series[(selection.name, labels)]
            for i, vs in enumerate(selection.value_sets):
                if not in_value_set(lab.get("deployment_id"), vs):
                    continue
                cells = out.setdefault(key, [None] * len(selection.value_sets))
                value = _reduce(series, selection, vs)
                if value is None:
                    continue
                old = cells[i]
                cells[i] = Cell(value, 1) if old is None else Cell(old.total + value, old.series + 1)
        return out

    def label_values(self, name: str, label: str, matchers: Matchers = ()) -> list[str]:
        """Sorted distinct values of ``label`` over the series ``name`` matching ``matchers``."""
        out: set[str] = set()
        for labels in self._by_name.get(name, []):
            lab = dict(labels)
            if lab.get(label) and all(lab.get(k) == v for k, v in matchers):
                out.add(lab[label])
        return sorted(out)

    def delete_before(self, ts_ms: int) -> int:
        """Drop samples older than ``ts_ms``; return how many were dropped."""
        dropped = 0
        for s in self._series.values():
            k = bisect.bisect_left(s.ts, ts_ms)
            dropped += k
            del s.ts[:k], s.values[:k]
        return dropped

    def stats(self) -> StoreStats:
        """Series and sample counts (bytes is 0: nothing on disk)."""
        return StoreStats(series=len(self._series), samples=sum(len(s.ts) for s in self._series.values()))

    def close(self) -> None:
        """Drop everything."""
        self._series.clear()
        self._by_name.clear()
