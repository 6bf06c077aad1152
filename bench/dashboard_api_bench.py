"""Dashboard API benchmark: organization GPU usage and histogram bounds over W1 in a DuckDB file.

    .venv/bin/python bench/dashboard_api_bench.py [--days 7] [--runs 20] [--out bench/out]

Generates the W1 series in process (``core_bench.generate``: 3 deployments x 8 replicas, a
``baseten_replicas_active`` gauge per deployment, a 10-bucket latency histogram), appends them to a DuckDB
store, then times at the query layer (no HTTP):

- ``gpu_usage`` over the last 7 days (30 min steps, 336 timestamps), the three deployments as GPU
  deployments (d1 2 x A100, d2 and d3 1 x H100), grouped by GPU type and by model;
- the same over the last hour (30 s steps);
- ``histogram_bounds`` of every catalog histogram (reads the series index only).

Prints p50 / p95 in ms. What the GPU usage page and the first render of the Metrics page wait for.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_bench import DAY, HOUR, generate, ingest  # noqa: E402
from timing import timed  # noqa: E402

from servemetrics.catalog import CATALOG, Kind  # noqa: E402
from servemetrics.query.bounds import histogram_bounds  # noqa: E402
from servemetrics.query.gpu_usage import GpuDeployment, GroupBy, gpu_usage  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402

GPU_DEPLOYMENTS = [
    GpuDeployment("m1", "w1", "d1", "A100", 2),
    GpuDeployment("m1", "w1", "d2", "H100", 1),
    GpuDeployment("m1", "w1", "d3", "H100", 1),
]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    args = ap.parse_args(argv)
    data = args.out / "dashboard-api"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    end = int(time.time() * 1000) // 60_000 * 60_000
    keys, ts, matrix = generate(args.days, end)
    store = DuckDBStore(data / "samples.duckdb")
    ingest(store, keys, ts, matrix, 60)
    print(f"W1 {args.days:g} d: {matrix.size:,} samples in {len(keys)} series")
    histograms = [m.name for m in CATALOG.values() if m.kind is Kind.HISTOGRAM]
    week = min(7 * DAY, int(args.days * DAY))
    cases = {
        "gpu_usage 7 d by gpu_type": lambda: gpu_usage(store, GPU_DEPLOYMENTS, end - week, end, end),
        "gpu_usage 7 d by model": lambda: gpu_usage(
            store, GPU_DEPLOYMENTS, end - week, end, end, GroupBy.MODEL
        ),
        "gpu_usage 1 h by gpu_type": lambda: gpu_usage(store, GPU_DEPLOYMENTS, end - HOUR, end, end),
        "histogram_bounds (all histograms)": lambda: histogram_bounds(store, "m1", histograms),
    }
    print(f"{'question':40} {'p50 ms':>8} {'p95 ms':>8}")
    for name, fn in cases.items():
        _, p50, p95 = timed(fn, args.runs)
        print(f"{name:40} {p50:8.1f} {p95:8.1f}")
    usage = gpu_usage(store, GPU_DEPLOYMENTS, end - week, end, end)
    print("7 d groups:", [(g.key, g.values[-1]) for g in usage.groups])
    store.close()


if __name__ == "__main__":
    main()
