"""Many readers at once: SERIES 24 h from 1 and from 50 concurrent clients, and ``/healthz`` meanwhile.

W1 (``--days`` of it, ending now) is fed to ``servemetrics serve`` (DuckDB) by a real vmagent, as
``remote_write_bench.py`` does (skipped when ``--run DIR`` already holds the fed store), then the service
is started again on that store and asked ``GET /v1/models/m1/environments/production/metrics`` for
SERIES over the last 24 h:

- ``1 reader``: one client, one request after the other, ``--seconds`` long;
- ``50 readers, one window``: 50 clients asking for the same fixed window (a dashboard open 50 times:
  identical requests share one computation, ``api/read_pool.py``);
- ``50 readers, 50 windows``: the same, each client's window 1 ms apart, so no two answers are shared.

For each: answers per second, the answers' p50 / p99 ms, and ``/healthz`` p50 / p99 ms polled every
100 ms meanwhile. The load average is printed: read the ratios, not the absolute times.

    python bench/readers_bench.py [--days 1] [--run DIR] [--seconds 20] [--readers 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from remote_write_bench import ours, to_prometheus_text  # noqa: E402
from w1_bench import API_KEY, Proc, generate  # noqa: E402

HOUR_MS = 3_600_000


def _poll_health(base: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            t = time.perf_counter()
            client.get(base + "/healthz").raise_for_status()
            out.append((time.perf_counter() - t) * 1000)
            stop.wait(0.1)


def _reader(url: str, params: dict[str, Any], until: float, out: list[float], errors: list[str]) -> None:
    with httpx.Client(timeout=300, headers={"Authorization": f"Api-Key {API_KEY}"}) as client:
        while time.perf_counter() < until:
            t = time.perf_counter()
            resp = client.get(url, params=params)
            if resp.status_code != 200:
                errors.append(f"{resp.status_code} {resp.text[:200]}")
                return
            out.append((time.perf_counter() - t) * 1000)


def readers(base: str, end_ms: int, n: int, seconds: float, shared_window: bool) -> dict[str, float]:
    """``n`` clients asking SERIES 24 h for ``seconds``: answers/s, answer and ``/healthz`` p50 / p99 ms."""
    url = base + "/v1/models/m1/environments/production/metrics"
    lat: list[list[float]] = [[] for _ in range(n)]
    errors: list[str] = []
    health: list[float] = []
    stop = threading.Event()
    poller = threading.Thread(target=_poll_health, args=(base, stop, health))
    poller.start()
    t0 = time.perf_counter()
    until = t0 + seconds
    threads = []
    for i in range(n):
        end = end_ms - (0 if shared_window else i)
        params = {"mode": "SERIES", "start_epoch_millis": end - 24 * HOUR_MS, "end_epoch_millis": end}
        threads.append(threading.Thread(target=_reader, args=(url, params, until, lat[i], errors)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    stop.set()
    poller.join()
    if errors:
        raise RuntimeError(f"{len(errors)} readers failed, the first: {errors[0]}")
    flat = np.array([x for per in lat for x in per])
    hp = np.array(health)
    return {
        "answers_per_s": flat.size / took,
        "p50_ms": float(np.percentile(flat, 50)),
        "p99_ms": float(np.percentile(flat, 99)),
        "healthz_p50_ms": float(np.percentile(hp, 50)),
        "healthz_p99_ms": float(np.percentile(hp, 99)),
    }


def reader_rows(run: Path, last_s: int, n_readers: int, seconds: float) -> dict[str, dict[str, float]]:
    """Start ``servemetrics serve`` on the store ``remote_write_bench.ours`` fed in ``run`` (its
    ``ours.yaml``) and time the three rows (1 reader; ``n_readers`` on one window; on as many windows) of
    SERIES over the 24 h ending at ``last_s`` (epoch s): {row name: ``readers(...)``}."""
    config = yaml.safe_load((run / "ours.yaml").read_text())
    config["api_rate_limit"] = {"per_second": 0}  # 50 clients of one key are over the default 100/s
    (run / "readers.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    base = "http://" + config["listen"]
    serve = Proc(
        [sys.executable, "-m", "servemetrics", "serve", "--config", str(run / "readers.yaml")],
        run / "readers.log",
        base + "/healthz",
    )
    rows = {}
    try:
        end_ms = (last_s + 1) * 1000
        readers(base, end_ms, 1, 3, True)  # warm-up
        rows["1 reader"] = readers(base, end_ms, 1, seconds, True)
        rows[f"{n_readers} readers, one window"] = readers(base, end_ms, n_readers, seconds, True)
        rows[f"{n_readers} readers, {n_readers} windows"] = readers(base, end_ms, n_readers, seconds, False)
    finally:
        serve.stop()
    return rows


def main(argv: list[str] | None = None) -> None:
    """Feed W1 once (unless ``--run`` holds it), then run the three reader rows and print them."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=1.0, help="days of W1 (1: 2.64 M samples)")
    ap.add_argument("--run", type=Path, help="working directory (default: a new temporary one)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each row's run")
    ap.add_argument("--readers", type=int, default=50)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "bench")
    args = ap.parse_args(argv)
    run = args.run or Path(tempfile.mkdtemp(prefix="readers-bench-"))
    run.mkdir(parents=True, exist_ok=True)
    meta = run / "fed.json"
    if not meta.exists():
        end_s = int(time.time()) // 60 * 60
        om = run / f"w1-{args.days:g}d.om"
        generate(args.shared, om, args.days, end_s)
        n, first_s, last_s = to_prometheus_text(om, run / "w1.prom")
        fed = ours(run, run / "w1.prom", n, first_s, 1800)
        meta.write_text(json.dumps({"samples": fed["samples"], "last_s": last_s}))
    last_s = json.loads(meta.read_text())["last_s"]
    rows = reader_rows(run, last_s, args.readers, args.seconds)
    print(f"SERIES 24 h of W1 ({args.days:g} d) on DuckDB, {args.seconds:g} s per row:\n")
    print("| readers | answers/s | p50 ms | p99 ms | /healthz p50 ms | /healthz p99 ms |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['answers_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
            f"{r['healthz_p50_ms']:.1f} | {r['healthz_p99_ms']:.1f} |"
        )
    print(f"\nload average {os.getloadavg()}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
