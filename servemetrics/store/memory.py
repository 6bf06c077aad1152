"""``MemoryStore``: the reference ``Store``, plain Python over sorted per-series arrays.

Slow and simple on purpose: every other backend must give the same answers on the same data
(conformance tests). Semantics are those of ``servemetrics.store.base``.
"""

from __future__ import annotations

import bisect
import math

from servemetrics.samples import SampleBatch
from servemetrics.store.base import (
    COUNTER_GAP_MS,
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
    __slots__ = ("_clean", "ts", "values")

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.values: list[float] = []
        self._clean: tuple[list[int], list[float]] | None = None

    def clean(self) -> tuple[list[int], list[float]]:
        """The samples that are not stale markers: (ts, values), cached until the next change."""
        if self._clean is None:
            kept = [(t, v) for t, v in zip(self.ts, self.values, strict=True) if not math.isnan(v)]
            self._clean = [t for t, _ in kept], [v for _, v in kept]
        return self._clean

    def drop_before(self, ts: int) -> int:
        """Drop the samples before ``ts``; return how many."""
        k = bisect.bisect_left(self.ts, ts)
        del self.ts[:k], self.values[:k]
        self._clean = None
        return k

    def add(self, ts: int, value: float) -> bool:
        self._clean = None
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


def _increase(s: _Series, lo: int, hi: int) -> float | None:
    """The pairs' deltas spread over ``(t0, t1]`` that fall in ``[lo, hi)``, plus the points of re-created
    counters (``store.base`` INCREASE); None when no pair overlaps the range and no point lies in it."""
    ts, vals = s.clean()
    first = max(bisect.bisect_left(ts, lo), 1)
    total, has = 0.0, False
    for k in range(first, len(ts)):
        t0, t1, v0, v1 = ts[k - 1], ts[k], vals[k - 1], vals[k]
        if t0 >= hi:
            break
        if t1 < lo:
            continue
        if t1 - t0 <= COUNTER_GAP_MS:
            overlap = min(t1, hi) - max(t0, lo)
            if overlap > 0:
                total += (v1 - v0 if v1 >= v0 else v1) * overlap / (t1 - t0)
                has = True
        elif v1 < v0 and t1 < hi and v1 != 0:
            total += v1
            has = True
    return total if has else None


def _mean(s: _Series, lo: int, hi: int) -> float | None:
    ts, vals = s.clean()
    i, j = bisect.bisect_left(ts, lo), bisect.bisect_left(ts, hi)
    return math.fsum(vals[i:j]) / (j - i) if j > i else None


def _last(s: _Series, hi: int, lookback: int) -> float | None:
    j = bisect.bisect_left(s.ts, hi)
    if j == 0 or s.ts[j - 1] < hi - lookback or math.isnan(s.values[j - 1]):
        return None
    return s.values[j - 1]


def _reduce(s: _Series, sel: Selection, vs: ValueSet) -> float | None:
    if sel.reducer is Reducer.INCREASE:
        return _increase(s, vs.start_ms, vs.end_ms)
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
        """Drop samples older than ``ts_ms``, and the series left without samples; return how many
        samples were dropped."""
        dropped = 0
        empty: list[SeriesKey] = []
        for key, s in self._series.items():
            dropped += s.drop_before(ts_ms)
            if not s.ts:
                empty.append(key)
        for name, labels in empty:
            del self._series[(name, labels)]
            kept = [lab for lab in self._by_name[name] if lab != labels]
            if kept:
                self._by_name[name] = kept
            else:
                del self._by_name[name]
        return dropped

    def stats(self) -> StoreStats:
        """Series and sample counts (bytes is 0: nothing on disk)."""
        return StoreStats(series=len(self._series), samples=sum(len(s.ts) for s in self._series.values()))

    def close(self) -> None:
        """Drop everything."""
        self._series.clear()
        self._by_name.clear()
