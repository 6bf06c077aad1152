"""Core benchmark: W1-like data through ``DuckDBStore.append``, then the default metric set's selections.

    .venv/bin/python bench/core_bench.py [--days 7] [--out bench/out] [--batch-minutes 60]
                                         [--order time|series] [--end-offset-minutes 0]
                                         [--runs 20] [--http] [--no-answer-cache]

Generates in process the series of workload W1 (``shared/bench/gen_w1.py``: 3 deployments x 8 replicas at
15 s: request counters by status, a 10-bucket latency histogram with _sum/_count, GPU utilisation and
memory, CPU seconds, working set, a replicas gauge per deployment), rounded as the W1 file prints them,
appends it in time order in batches of ``--batch-minutes`` of every series, and prints ingest samples/s,
bytes per sample on disk after a checkpoint, and p50/p95 of the store-level selections that answer
SERIES 7 d (30 m step), 24 h (5 m), 6 h (1 m), 1 h (30 s), SUMMARY 7 d and CURRENT for the default metric set.
With ``--http`` it also starts ``python -m servemetrics serve`` on the same data directory and times
the same questions through ``GET /v1/models/m1/environments/production/metrics``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from math import erf, sqrt
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servemetrics.samples import SampleBatch  # noqa: E402
from servemetrics.store import STORE_FILE  # noqa: E402
from servemetrics.store.base import Reducer, Selection, ValueSet  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402
from servemetrics.types import labels_of  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import timed  # noqa: E402

STEP_MS = 15_000
MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
DEPS = ("d1", "d2", "d3")
BOUNDS = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "+Inf"]
EDGES = np.array([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])
HIST = "baseten_end_to_end_response_time_seconds"
REQ = "baseten_inference_requests_total"
REPLICAS = "baseten_replicas_active"
API_KEY = "bench-key-0123456789"


def generate(days: float, end_ms: int) -> tuple[list[tuple[str, tuple]], np.ndarray, np.ndarray]:
    """W1 series keys, the timestamps, and a (time x series) matrix of values (seeded)."""
    ts = np.arange(end_ms - int(days * DAY), end_ms, STEP_MS, dtype=np.int64)
    n = ts.size
    rng = np.random.default_rng(7)
    keys: list[tuple[str, tuple]] = []
    cols: list[np.ndarray] = []

    def add(name: str, labels: dict[str, str], values: np.ndarray) -> None:
        keys.append((name, labels_of(labels)))
        cols.append(values)

    for d in DEPS:
        add(REPLICAS, {"model_id": "m1", "deployment_id": d}, np.full(n, 8.0))
    cdf = np.array([0.5 * (1 + erf((np.log(e) - np.log(0.08)) / (0.6 * sqrt(2)))) for e in EDGES])
    pvals = np.diff(np.concatenate(([0.0], cdf, [1.0])))
    for d in DEPS:
        for r in range(8):
            base = {"model_id": "m1", "deployment_id": d, "replica": f"{d}-r{r}"}
            for code, rate in (("200", 20.0), ("429", 0.5), ("500", 0.2)):
                inc = rng.poisson(rate * 15, n).astype(float)
                add(REQ, {**base, "status_code": code, "is_async": "false"}, np.cumsum(inc))
            lab = {**base, "status_code": "200", "is_async": "false"}
            obs = rng.poisson(300, n)
            per_bucket = rng.multinomial(obs, pvals)  # (n, 10 finite + overflow)
            cum = np.cumsum(np.cumsum(per_bucket, axis=1), axis=0).astype(float)
            for j, b in enumerate(BOUNDS):
                add(f"{HIST}_bucket", {**lab, "le": b}, cum[:, min(j, 9)] if j < 9 else cum[:, -1])
            sums = np.round(np.cumsum(obs * 0.08 * np.exp(0.18) * rng.normal(1, 0.05, n)), 6)
            add(f"{HIST}_sum", lab, sums)
            add(f"{HIST}_count", lab, cum[:, -1].copy())
    for d in DEPS:
        for r in range(8):
            base = {"model_id": "m1", "deployment_id": d, "replica": f"{d}-r{r}"}
            add(
                "baseten_gpu_utilization",
                {**base, "gpu": "0"},
                # W1 prints percent; stored as the 0-1 ratio the passthrough adapter makes of it
                np.round(np.clip(rng.normal(60, 15, n), 0, 100), 1) / 100,
            )
            add("baseten_gpu_memory_used", {**base, "gpu": "0"}, 40000.0 + rng.integers(0, 500, n))
            add(
                "baseten_container_cpu_usage_seconds_total",
                base,
                np.round(np.cumsum(rng.uniform(10, 20, n)), 3),
            )
            add("baseten_container_cpu_memory_working_set_bytes", base, 4e9 + rng.integers(0, 1 << 28, n))
    return keys, ts, np.stack(cols, axis=1)


def ingest(store: DuckDBStore, keys, ts: np.ndarray, matrix: np.ndarray, batch_minutes: float) -> float:
    """Append in time order, one batch per ``batch_minutes`` of every series; return samples/s."""
    per = max(1, int(batch_minutes * MIN / STEP_MS))
    n_series = len(keys)
    idx = np.arange(n_series, dtype=np.uint32)
    total, spent = 0, 0.0
    for a in range(0, ts.size, per):
        b = min(a + per, ts.size)
        batch = SampleBatch(
            keys, np.tile(idx, b - a), np.repeat(ts[a:b], n_series), np.ascontiguousarray(matrix[a:b]).ravel()
        )
        t = time.perf_counter()
        total += store.append(batch)
        spent += time.perf_counter() - t
    return total / spent


def ingest_series_order(
    store: DuckDBStore, keys, ts: np.ndarray, matrix: np.ndarray, batch_samples: int
) -> float:
    """Append as a backfill file is read (W1 is written series by series): batches of ``batch_samples``."""
    n_t, n_series = matrix.shape
    flat_vals = np.ascontiguousarray(matrix.T).ravel()
    flat_idx = np.repeat(np.arange(n_series, dtype=np.uint32), n_t)
    flat_ts = np.tile(ts, n_series)
    total, spent = 0, 0.0
    for a in range(0, flat_vals.size, batch_samples):
        b = min(a + batch_samples, flat_vals.size)
        batch = SampleBatch(keys, flat_idx[a:b], flat_ts[a:b], flat_vals[a:b])
        t = time.perf_counter()
        total += store.append(batch)
        spent += time.perf_counter() - t
    return total / spent


def timeline(end_ms: int) -> list[tuple[int, frozenset[str]]]:
    """Promotions: d1, then d2 (instant) 4 days before the end, then d3 rolling (with d2) for an hour."""
    d2 = end_ms - 4 * DAY - 17 * MIN
    d3 = end_ms - DAY - 43 * MIN
    return [
        (0, frozenset({"d1"})),
        (d2, frozenset({"d2"})),
        (d3, frozenset({"d2", "d3"})),
        (d3 + HOUR, frozenset({"d3"})),
    ]


def value_sets(lo: int, hi: int, step: int, end_ms: int) -> tuple[ValueSet, ...]:
    """Value sets as the planner makes them: window start, grid points, promotion instants."""
    tl = timeline(end_ms)
    cuts = sorted({lo, *range((lo // step + 1) * step, hi, step), *(t for t, _ in tl if lo < t < hi)})
    bounds = [*cuts, hi]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        deps = [d for t, d in tl if t <= a][-1]
        out.append(ValueSet(a, b, deps))
    return tuple(out)


def default_set(sets: tuple[ValueSet, ...], current: bool = False) -> list[Selection]:
    """The store selections behind the API's default metric set."""
    m = (("model_id", "m1"),)
    gauge = Selection(
        REPLICAS, Reducer.LAST if current else Reducer.MEAN, sets, ("deployment_id",), m, 5 * MIN
    )
    return [
        gauge,
        Selection(REQ, Reducer.INCREASE, sets, ("status_code",), m),
        Selection(f"{HIST}_bucket", Reducer.INCREASE, sets, ("le",), m),
        Selection(f"{HIST}_sum", Reducer.INCREASE, sets, (), m),
        Selection(f"{HIST}_count", Reducer.INCREASE, sets, (), m),
    ]


def questions(now_ms: int, end_ms: int) -> dict[str, list[Selection]]:
    return {
        "SERIES 7 d (30 m step)": default_set(value_sets(now_ms - 7 * DAY, now_ms, 30 * MIN, end_ms)),
        "SERIES 24 h (5 m step)": default_set(value_sets(now_ms - DAY, now_ms, 5 * MIN, end_ms)),
        "SERIES 6 h (1 m step)": default_set(value_sets(now_ms - 6 * HOUR, now_ms, MIN, end_ms)),
        "SERIES 1 h (30 s step)": default_set(value_sets(now_ms - HOUR, now_ms, 30_000, end_ms)),
        "SUMMARY 7 d": default_set(value_sets(now_ms - 7 * DAY, now_ms, 8 * DAY, end_ms)),
        "CURRENT (last 5 m)": default_set(
            value_sets(now_ms - 5 * MIN, now_ms, 8 * DAY, end_ms), current=True
        ),
    }


def time_questions(store: DuckDBStore, now: int, end_ms: int, runs: int) -> None:
    """Print p50/p95 of each question (all selections of the default metric set)."""
    for name, sels in questions(now, end_ms).items():
        _, p50, p95 = timed(lambda sels=sels: [store.select(s) for s in sels], runs)
        print(f"  {name:24s} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms   ({len(sels[0].value_sets)} value sets)")


def service_config(
    data_dir: Path, port: int, promotions: list[dict[str, Any]], store: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The benchmarks' service config as a dict: organization ``bench`` with ``API_KEY``, model m1 with
    deployments d1-d3 of 8 replicas each (no scrape targets: the data is imported), environment
    ``production`` with ``promotions``; ``store`` is the config's ``store:`` section (default: DuckDB)."""
    cfg: dict[str, Any] = {"listen": f"127.0.0.1:{port}", "data_dir": str(data_dir)}
    if store is not None:
        cfg["store"] = store
    cfg["organizations"] = [{"name": "bench", "api_keys": [{"key": API_KEY, "type": "WORKSPACE_MANAGE_ALL"}]}]
    cfg["models"] = [
        {
            "id": "m1",
            "name": "m1",
            "organization": "bench",
            "deployments": [
                {"id": d, "name": d, "replicas": [{"id": f"{d}-r{r}", "targets": []} for r in range(8)]}
                for d in DEPS
            ],
            "environments": [{"name": "production", "promotions": promotions}],
        }
    ]
    return cfg


def write_config(path: Path, data_dir: Path, port: int, end_ms: int) -> None:
    """The service config for ``--http``: model m1, deployments d1-d3, the promotion timeline."""
    import yaml

    def at(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")

    tl = timeline(end_ms)
    start = end_ms - 8 * DAY
    promotions = [
        {"deployment": "d1", "at": at(start)},
        {"deployment": "d2", "at": at(tl[1][0])},
        {"deployment": "d3", "at": at(tl[2][0]), "percent": 50},
        {"deployment": "d3", "at": at(tl[3][0]), "percent": 100},
    ]
    path.write_text(yaml.safe_dump(service_config(data_dir, port, promotions), sort_keys=False))


def bench_http(out: Path, data_dir: Path, end_ms: int, runs: int) -> None:
    """Time the same questions through the HTTP API of ``python -m servemetrics serve``."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = out / "bench.yaml"
    write_config(cfg, data_dir, port, end_ms)
    url = f"http://127.0.0.1:{port}/v1/models/m1/environments/production/metrics"
    headers = {"Authorization": f"Api-Key {API_KEY}"}
    log = open(out / "serve.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "servemetrics", "serve", "--config", str(cfg)],
        cwd=Path(__file__).resolve().parents[1],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(timeout=60) as client:
            deadline = time.time() + 60
            while True:
                try:
                    if client.get(url, params={"mode": "CURRENT"}, headers=headers).status_code < 500:
                        break
                except httpx.TransportError:
                    pass
                if time.time() > deadline or proc.poll() is not None:
                    print("HTTP: the service did not come up; skipped")
                    return
                time.sleep(0.5)
            now = int(time.time() * 1000)
            params = {
                "SERIES 7 d (30 m step)": {
                    "mode": "SERIES",
                    "start_epoch_millis": now - 7 * DAY,
                    "end_epoch_millis": now,
                },
                "SERIES 24 h (5 m step)": {
                    "mode": "SERIES",
                    "start_epoch_millis": now - DAY,
                    "end_epoch_millis": now,
                },
                "SERIES 6 h (1 m step)": {
                    "mode": "SERIES",
                    "start_epoch_millis": now - 6 * HOUR,
                    "end_epoch_millis": now,
                },
                "SERIES 1 h (30 s step)": {
                    "mode": "SERIES",
                    "start_epoch_millis": now - HOUR,
                    "end_epoch_millis": now,
                },
                "SUMMARY 7 d": {
                    "mode": "SUMMARY",
                    "start_epoch_millis": now - 7 * DAY,
                    "end_epoch_millis": now,
                },
                "CURRENT (last 5 m)": {"mode": "CURRENT"},
            }
            print("\nHTTP API (one request = the whole default metric set):")
            for name, p in params.items():
                r = client.get(url, params=p, headers=headers)
                if r.status_code != 200:
                    print(f"  {name:24s} HTTP {r.status_code}: {r.text[:200]}")
                    continue
                filled, total = _count_values(r.json())
                _, p50, p95 = timed(
                    lambda p=p: client.get(url, params=p, headers=headers).raise_for_status(), runs
                )
                print(
                    f"  {name:24s} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms"
                    f"   ({filled} of {total} values non-null)"
                )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _count_values(doc: dict) -> tuple[int, int]:
    """Non-null and all cells of ``metric_values[*].values`` (a sanity check that data came back)."""
    cells = [c for vs in doc.get("metric_values", []) for row in vs.get("values", []) for c in row]
    return sum(c is not None for c in cells), len(cells)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    ap.add_argument("--batch-minutes", type=float, default=60)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--order", choices=("time", "series"), default="time")
    ap.add_argument("--http", action="store_true")
    ap.add_argument(
        "--no-answer-cache",
        action="store_true",
        help="store-level timings with DuckDBStore's answer cache off (answer_entries=0), for a side-by-side",
    )
    ap.add_argument(
        "--end-offset-minutes",
        type=float,
        default=0,
        help="end the data this many minutes after now (bytes per sample depend on where the data ends)",
    )
    args = ap.parse_args(argv)
    data_dir = args.out / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    end_ms = int(time.time() * 1000 + args.end_offset_minutes * MIN) // STEP_MS * STEP_MS + STEP_MS
    t = time.perf_counter()
    keys, ts, matrix = generate(args.days, end_ms)
    n = matrix.size
    print(f"generated {n:,} samples in {len(keys)} series ({time.perf_counter() - t:.1f} s)")
    answers = {"answer_entries": 0} if args.no_answer_cache else {}
    store = DuckDBStore(data_dir / STORE_FILE, **answers)
    if args.order == "time":
        rate = ingest(store, keys, ts, matrix, args.batch_minutes)
        how = f"{args.batch_minutes:g}-minute batches of all series"
    else:
        rate = ingest_series_order(store, keys, ts, matrix, 500_000)
        how = "500,000-sample batches in series order, as the importer reads W1"
    print(f"ingest: {rate:,.0f} samples/s through append ({how})")
    store.checkpoint()
    st = store.stats()
    print(
        f"disk: {st.bytes:,} bytes = {st.bytes / n:.3f} B/sample after checkpoint"
        f" ({st.samples:,} samples stored)"
    )
    now = end_ms - 7_531  # a realistic, unaligned "now" just after the last scrape
    print(f"\nstore-level selections, default metric set, {args.runs} runs after a warm-up:")
    time_questions(store, now, end_ms, args.runs)
    store.close()
    cold = DuckDBStore(data_dir / STORE_FILE, cache_samples=0, **answers)
    print("\nthe same after reopening, without the decoded-chunk cache (every raw edge decoded again):")
    time_questions(cold, now, end_ms, args.runs)
    cold.close()
    if args.http:
        bench_http(args.out.resolve(), data_dir.resolve(), end_ms, args.runs)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
