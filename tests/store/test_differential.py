"""``DuckDBStore`` gives ``MemoryStore``'s answers on random data (resets, gaps, duplicates, late samples)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.store.helpers import HOUR, MIN, T0, assert_same, random_batches, random_series

DEPS = ("d0", "d1", "d2")
QUESTIONS = [
    ("req_total", Reducer.INCREASE, ("status_code",)),
    ("lat_bucket", Reducer.INCREASE, ("le",)),
    ("util", Reducer.MEAN, ("deployment_id",)),
    ("util", Reducer.LAST, ()),
    ("req_total", Reducer.LAST, ("replica",)),
    ("no_dep", Reducer.MEAN, ()),
]


def grid_sets(
    rng: np.random.Generator, lo: int, hi: int, step: int, promote: bool = True
) -> tuple[ValueSet, ...]:
    """Value sets as the planner makes them: window edges, grid points, a promotion instant."""
    cuts = {lo, hi, *range((lo // step + 1) * step, hi, step)}
    if promote:
        cuts.add(int(rng.integers(lo + 1, hi)))
    cuts_l = sorted(cuts)
    instant = cuts_l[len(cuts_l) // 2]
    out = []
    for a, b in zip(cuts_l[:-1], cuts_l[1:], strict=True):
        deps = frozenset(DEPS[:2]) if a < instant else frozenset(DEPS[1:])
        out.append(ValueSet(a, b, deps))
    return tuple(out)


def random_sets(rng: np.random.Generator, lo: int, hi: int, n: int) -> tuple[ValueSet, ...]:
    """Arbitrary, possibly overlapping value sets with random deployment sets."""
    out = []
    for _ in range(n):
        a = int(rng.integers(lo, hi - 1))
        b = int(rng.integers(a + 1, min(hi, a + 6 * HOUR) + 1))
        if rng.random() < 0.5:  # snap to the rollup grid now and then
            a, b = (
                a // (30 * MIN) * 30 * MIN,
                max(b // (30 * MIN) * 30 * MIN, a // (30 * MIN) * 30 * MIN + 30 * MIN),
            )
        deps = frozenset(d for d in DEPS if rng.random() < 0.7)
        out.append(ValueSet(a, b, deps))
    return tuple(out)


def value_set_families(rng: np.random.Generator, lo: int, hi: int) -> list[tuple[ValueSet, ...]]:
    ragged = lo + int(rng.integers(1, 30 * MIN))
    return [
        grid_sets(rng, ragged, hi - int(rng.integers(1, 30 * MIN)), 30 * MIN),
        grid_sets(rng, lo, hi, 30 * MIN, promote=False),
        grid_sets(rng, hi - HOUR - 7_777, hi - 7_777, 30_000),
        grid_sets(rng, lo + 3 * HOUR, lo + 9 * HOUR, 5 * MIN),
        (ValueSet(ragged, hi - 12_345, frozenset(DEPS)),),
        (ValueSet(lo + 2 * HOUR, hi - 5 * MIN - 3, frozenset(DEPS)),),  # aligned start, ragged end
        (ValueSet(hi - 5 * MIN, hi, frozenset(DEPS)),),  # CURRENT
        random_sets(rng, lo - HOUR, hi + HOUR, 12),
    ]


def compare(duck: DuckDBStore, mem: MemoryStore, rng: np.random.Generator, lo: int, hi: int) -> int:
    checked = 0
    for sets in value_set_families(rng, lo, hi):
        for name, reducer, group_by in QUESTIONS:
            for lookback in (MIN, 10 * MIN, 45 * MIN, 3 * HOUR):
                sel = Selection(name, reducer, sets, group_by, (("model_id", "m1"),), lookback)
                assert_same(duck.select(sel), mem.select(sel))
                checked += 1
    return checked


@pytest.mark.parametrize("seed", range(6))
def test_randomized_against_memory(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = random_series(rng)
    start = T0 + int(rng.integers(0, HOUR))
    hours = float(rng.uniform(6, 14))
    duck, mem = DuckDBStore(tmp_path / "s.duckdb"), MemoryStore()
    for b in random_batches(rng, keys, start, hours, int(rng.integers(3, 12))):
        assert duck.append(b) == mem.append(b)
    assert duck.stats().samples == mem.stats().samples
    hi = start + int(hours * HOUR)
    assert compare(duck, mem, rng, start, hi) > 0
    cut = start + int(rng.uniform(1, 4) * HOUR)
    assert duck.delete_before(cut) == mem.delete_before(cut)
    compare(duck, mem, rng, start, hi)
    duck.close()
    reopened = DuckDBStore(tmp_path / "s.duckdb")  # durable: the same answers after close/reopen
    compare(reopened, mem, rng, start, hi)
    more = random_batches(rng, keys, start + HOUR, hours, 3)  # late data into sealed chunks, after reopen
    for b in more:
        assert reopened.append(b) == mem.append(b)
    compare(reopened, mem, rng, start, hi + HOUR)
    reopened.close()
