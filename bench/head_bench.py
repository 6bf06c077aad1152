"""Append cost as the head grows: scrape-like ticks into ``DuckDBStore`` (issue 18 part 4).

    .venv/bin/python bench/head_bench.py [--series 20000] [--ticks 500] [--merge-all] [--out bench/out]

Each tick appends one sample of every series (ts 15 s apart, from a chunk boundary, so that no seal
happens within 520 ticks: the head only grows; 500 ticks of 20,000 series end at 10 M head samples).
It prints, per tenth of the run, the head's size, its number of segments and the mean and slowest
append in ms. ``--merge-all`` times the head as it was before issue 18 (every 33rd append re-sorted
the whole head) for a side-by-side figure in one run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servemetrics.samples import SampleBatch  # noqa: E402
from servemetrics.store import duckdb_view  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402
from servemetrics.types import labels_of  # noqa: E402

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a chunk boundary


def _merge_all(segments: tuple, cap: int = 0) -> tuple:
    """The pre-issue-18 rule: more than 32 segments -> one, the whole head re-sorted."""
    if len(segments) > 32:
        return (duckdb_view.sort_segment(*duckdb_view.concat(segments)),)
    return segments


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=20_000)
    ap.add_argument("--ticks", type=int, default=500)
    ap.add_argument("--merge-all", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    args = ap.parse_args()
    if args.merge_all:
        duckdb_view.tiered = _merge_all  # type: ignore[assignment]
    data = args.out / "head_bench"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    store = DuckDBStore(data / "samples.duckdb")
    keys = [("bench_gauge", labels_of({"model_id": "m1", "replica": f"r{i}"})) for i in range(args.series)]
    index = np.arange(args.series, dtype=np.int64)
    rng = np.random.default_rng(0)
    times: list[float] = []
    rows = []
    for tick in range(args.ticks):
        ts = np.full(args.series, T0 + tick * 15_000, dtype=np.int64)
        batch = SampleBatch(keys, index, ts, rng.random(args.series))
        started = time.perf_counter()
        store.append(batch)
        times.append((time.perf_counter() - started) * 1000)
        if (tick + 1) % max(1, args.ticks // 10) == 0:
            view = store._view
            part = times[-max(1, args.ticks // 10) :]
            rows.append((view.head_samples(), len(view.head), float(np.mean(part)), max(part)))
    store.close()
    rule = "merge-all" if args.merge_all else "tiered"
    print(f"{'head samples':>13} {'segments':>8} {'mean ms':>8} {'max ms':>8}  ({rule})")
    for n, segs, mean, worst in rows:
        print(f"{n:>13,} {segs:>8} {mean:>8.1f} {worst:>8.1f}")
    shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
