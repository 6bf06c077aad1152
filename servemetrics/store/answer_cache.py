"""The answer cache of ``DuckDBStore.select`` (issue 18 part 3): answers per (question, value set), kept
only for value sets that are immutable, so a cached answer is the answer.

A value set's answer reads samples before its end only (INCREASE: the samples in it and the one before
it; LAST: the newest within the lookback before its end; MEAN: the samples in it). When the value set
ends at or before the store's sealed boundary, all of those are in sealed chunks, which change only by
a rewrite (late samples, retention) under the ``Generation`` sequence lock, and the groups it has
depend only on the series matched, whose ids only grow. So an entry is keyed by the question (name,
reducer, group_by, matchers, lookback), the matched series (their count and highest id: a new series
makes another key) and the value set, and is valid while the generation it was computed at is current:
any rewrite empties the cache. A value set ending after the boundary (the open edge) is always computed.

Each entry holds, for every group whose series serve in that value set, its ``Cell`` or ``None``:
exactly what ``group_cells`` gives that value set, so answers put together from entries and fresh
computation are the answers computed whole (``tests/store/test_answer_cache.py`` holds this).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from servemetrics.store.base import Cell, GroupKey, Selection, SelectResult, ValueSet
from servemetrics.store.duckdb_groups import serving

Entry = dict[GroupKey, Cell | None]


class AnswerCache:
    """A bounded LRU of ``Entry`` by key, valid for one generation; thread-safe."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Any, Entry] = OrderedDict()
        self._gen = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any, gen: int) -> Entry | None:
        """The entry of ``key`` computed at generation ``gen``; None (and the cache emptied) when the
        generation moved on."""
        with self._lock:
            if gen != self._gen:
                self._entries.clear()
                self._gen = gen
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: Any, gen: int, entry: Entry) -> None:
        """Keep ``entry`` for ``key`` when ``gen`` is still the cache's generation; the least recently
        used entries go beyond ``max_entries``."""
        with self._lock:
            if gen != self._gen:
                return
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _serving(
    value_sets: Sequence[ValueSet], groups: Sequence[GroupKey], deployments: Sequence[str | None]
) -> dict[GroupKey, np.ndarray]:
    """Per group, which of ``value_sets`` one of its series serves in (``duckdb_groups.serving``)."""
    out: dict[GroupKey, np.ndarray] = {}
    for g, row in zip(groups, serving(value_sets, deployments), strict=True):
        out[g] = out[g] | row if g in out else row
    return out


def cached_select(
    cache: AnswerCache,
    selection: Selection,
    series: tuple[int, int],
    groups: Sequence[GroupKey],
    deployments: Sequence[str | None],
    sealed_until: int,
    generation: Callable[[], int],
    evaluate: Callable[[Selection], SelectResult],
) -> SelectResult:
    """``evaluate(selection)``, with the value sets ending at or before ``sealed_until`` answered from
    ``cache`` when it has them (and kept there when computed). ``series``: (count, highest id) of the
    matched series; ``groups`` / ``deployments``: each matched series' group key and deployment id;
    ``generation()``: the store's current generation (odd while a rewrite commits: nothing is cached)."""
    gen = generation()
    sets = selection.value_sets
    if gen % 2:
        return evaluate(selection)
    base = (selection.name, selection.reducer, selection.group_by, selection.matchers, selection.lookback_ms)
    base_key = (base, series)
    sealed = [vs.end_ms <= sealed_until for vs in sets]
    hits = [cache.get((base_key, vs), gen) if ok else None for vs, ok in zip(sets, sealed, strict=True)]
    todo = [j for j, hit in enumerate(hits) if hit is None]
    fresh = evaluate(replace(selection, value_sets=tuple(sets[j] for j in todo))) if todo else {}
    if generation() != gen:  # a rewrite meanwhile: the entries may be older than the fresh part
        return evaluate(selection)
    keep = [k for k, j in enumerate(todo) if sealed[j]]
    if keep:
        serving = _serving([sets[todo[k]] for k in keep], groups, deployments)
        for n, k in enumerate(keep):
            entry = {g: fresh[g][k] for g, row in serving.items() if row[n]}
            cache.put((base_key, sets[todo[k]]), gen, entry)
    if len(todo) == len(sets):
        return fresh
    keys = set(fresh)
    for hit in hits:
        if hit is not None:
            keys.update(hit)
    out: SelectResult = {g: [None] * len(sets) for g in sorted(keys)}
    for k, j in enumerate(todo):
        for g, cells in fresh.items():
            out[g][j] = cells[k]
    for j, hit in enumerate(hits):
        if hit is not None:
            for g, cell in hit.items():
                out[g][j] = cell
    return out
