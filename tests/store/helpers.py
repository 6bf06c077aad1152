"""Helpers for store tests: batches from tuples, random workloads, result comparison."""

from __future__ import annotations

import math

import numpy as np

from servemetrics.samples import STALE_NAN, Sample, SampleBatch
from servemetrics.store.base import Cell, SelectResult
from servemetrics.types import labels_of

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
MIN = 60_000
HOUR = 60 * MIN


def batch(name: str, labels: dict[str, str], points: list[tuple[int, float]]) -> SampleBatch:
    """A batch of one series from ``(ts_ms, value)`` points."""
    lab = labels_of(labels)
    return SampleBatch.from_samples(Sample(name, lab, float(v), int(t)) for t, v in points)


def assert_same(got: SelectResult, want: SelectResult, rel: float = 1e-9) -> None:
    """Equal group keys, the same ``None`` cells, totals within ``rel`` and equal series counts."""
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, cells in want.items():
        assert len(got[key]) == len(cells)
        for i, (g, w) in enumerate(zip(got[key], cells, strict=True)):
            if w is None or g is None:
                assert g is w, (key, i, g, w)
                continue
            assert isinstance(g, Cell)
            assert g.series == w.series, (key, i, g, w)
            assert math.isclose(g.total, w.total, rel_tol=rel, abs_tol=1e-9) or (
                math.isnan(g.total) and math.isnan(w.total)
            ), (key, i, g, w)


def random_series(rng: np.random.Generator, n_deps: int = 3, n_rep: int = 2) -> list[tuple[str, tuple]]:
    """Series keys: a counter by status, a gauge, a histogram bucket set, over deployments and replicas."""
    keys = []
    for d in range(n_deps):
        for r in range(n_rep):
            base = {"model_id": "m1", "deployment_id": f"d{d}", "replica": f"d{d}-r{r}"}
            for code in ("200", "500"):
                keys.append(("req_total", labels_of({**base, "status_code": code})))
            keys.append(("util", labels_of(base)))
            for le in ("0.1", "1", "+Inf"):
                keys.append(("lat_bucket", labels_of({**base, "le": le})))
    keys.append(("no_dep", labels_of({"model_id": "m1"})))
    return keys


def random_points(
    rng: np.random.Generator, kind: str, start: int, hours: float
) -> tuple[np.ndarray, np.ndarray]:
    """Samples of one series: a 15 s grid with jitter, gaps, counter resets or gauge noise, and a few
    stale markers (NaN); now and then the counter is re-created during its gap (a drop after it), and now
    and then the series ends early with a stale marker (its replica left the target)."""
    n = int(hours * 240)
    ts = start + np.arange(n, dtype=np.int64) * 15_000
    if rng.random() < 0.5:
        ts = ts + rng.integers(0, 15_000, n)
        ts = np.unique(ts)
    keep = rng.random(ts.size) > 0.05
    gap_at = rng.integers(0, ts.size)
    keep[gap_at : gap_at + int(rng.integers(0, 400))] = False  # a gap of up to 100 min
    ts = ts[keep]
    if kind == "util":
        vals = np.round(rng.normal(0.5, 0.2, ts.size), 3)
    else:
        vals = np.cumsum(rng.poisson(5, ts.size)).astype(float)
        resets = list(rng.integers(0, max(ts.size, 1), 3))
        if rng.random() < 0.5:
            resets.append(min(gap_at, max(ts.size - 1, 0)))  # the first sample after the gap drops
        for r in resets:  # resets, including tiny dips
            vals[r:] -= vals[r] - (rng.random() * 3 if rng.random() < 0.5 else vals[r] - 0.1)
        vals = np.round(vals, 2)
    if ts.size:
        vals[rng.integers(0, ts.size, 3)] = STALE_NAN  # markers: no value for any reducer but LAST
    if ts.size > 2 and rng.random() < 0.3:  # the replica left its target: a marker after its last sample
        end = int(rng.integers(1, ts.size))
        ts, vals = ts[: end + 1].copy(), vals[: end + 1].copy()
        vals[end] = STALE_NAN
    return ts, vals


def random_batches(
    rng: np.random.Generator, keys, start: int, hours: float, n_batches: int
) -> list[SampleBatch]:
    """All samples of ``keys``, split in time order into batches, with duplicates and late samples."""
    idx, tss, vals = [], [], []
    for i, (name, _) in enumerate(keys):
        t, v = random_points(rng, "util" if name in ("util", "no_dep") else "counter", start, hours)
        idx.append(np.full(t.size, i, np.uint32))
        tss.append(t)
        vals.append(v)
    sidx, ts, val = np.concatenate(idx), np.concatenate(tss), np.concatenate(vals)
    order = np.argsort(ts, kind="stable")
    sidx, ts, val = sidx[order], ts[order], val[order]
    # duplicates with a different value (the first write must win) and late samples moved to the end
    dup = rng.choice(ts.size, ts.size // 50, replace=False)
    late = rng.choice(ts.size, ts.size // 50, replace=False)
    mask = np.ones(ts.size, bool)
    mask[late] = False
    order = np.concatenate([np.flatnonzero(mask), late, dup])
    changed = np.nan_to_num(val[dup], nan=0.0) + 1000.0  # a marker's duplicate: a value
    vals_all = np.concatenate([val[mask], val[late], changed])
    sidx, ts = sidx[order], ts[order]
    cuts = np.linspace(0, ts.size, n_batches + 1).astype(int)
    return [
        SampleBatch(list(keys), sidx[a:b], ts[a:b], vals_all[a:b])
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
