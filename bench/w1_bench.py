"""W1 side by side: our API on the embedded store and on VictoriaMetrics vs raw PromQL on the engines.

    .venv/bin/python bench/w1_bench.py [--shared ../shared/bench] [--work-dir DIR] [--days 7]
                                       [--end EPOCH_S] [--runs 10] [--no-reference]
                                       [--reuse-run DIR/run_...] [--ingest [--readers 50]
                                       [--reader-seconds 20]]

1. Generates workload W1 with ``<shared>/gen_w1.py`` into ``--work-dir`` (kept there and reused when the
   same ``--days`` / ``--end`` file exists; never written into the repository).
2. Reads it once with our import path (``ingest.backfill.iter_backfill``: parser + source adapters) and
   appends every batch to a ``DuckDBStore`` and to a ``PrometheusStore`` on a VictoriaMetrics process
   (remote_write, the ``store: {kind: prometheus, flavor: victoriametrics}`` path), timing each
   store's share. A short top-up of W1 ending a few minutes from now follows, so that CURRENT (the last
   5 minutes of the service's clock) has data; the windows of the other questions end at ``--end``.
3. Starts ``servemetrics serve`` on each store (model m1; environment ``production`` served by d1, d2
   and d3 for the whole week, so the API aggregates what the PromQL aggregates) and times SERIES 7 d,
   SERIES 1 h, SUMMARY 7 d and CURRENT, one request per question (the default metric set: replicas,
   requests by status, latency quantiles and average), p50 / p95 over ``--runs`` after a warm-up.
4. Loads Prometheus with ``promtool tsdb create-blocks-from openmetrics --max-block-duration=24h`` and
   (unless ``--no-reference``) a second VictoriaMetrics with its own ``/api/v1/import/prometheus``
   (millisecond timestamps), and times the same questions as raw PromQL with ``<shared>/prom_bench.py``
   (VictoriaMetrics with ``nocache=1`` and with its cache).
5. Prints one table: p50 ms per question and store, ratios ours / engine, bytes per sample (DuckDB files
   after a checkpoint; Prometheus' blocks as promtool wrote them; VictoriaMetrics' data directory after
   a clean stop).

6. With ``--ingest``: the ingest and readers rows (``remote_write_bench.remote_write_row``: ours and then
   VictoriaMetrics fed the same W1 by a real vmagent; ``readers_bench.reader_rows``: SERIES 24 h from 1
   and ``--readers`` clients on the store the vmagent fed), in a second table with the ratios against
   VictoriaMetrics and one reader, and the load average after each part (read the ratios).

Everything of a run lives in ``<work-dir>/run_<epoch s>``; ``--reuse-run`` times it again without
importing (a new top-up is appended first), e.g. when the machine is quieter.

Needs Debian's ``prometheus`` (with ``promtool``) and ``victoria-metrics`` (``scripts/install``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "bench"))
from core_bench import API_KEY, service_config  # noqa: E402
from timing import timed  # noqa: E402

from servemetrics.ingest.backfill import iter_backfill  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402
from servemetrics.store.prometheus import EngineOptions, PrometheusStore  # noqa: E402
from servemetrics.store.promql import Flavor  # noqa: E402

DAY_S = 86_400
QUESTIONS = ("SERIES 7 d", "SERIES 1 h", "SUMMARY 7 d", "CURRENT")
PROM_BENCH_NAMES = {"SERIES 7d": "SERIES 7 d", "SERIES 1h": "SERIES 1 h", "SUMMARY 7d": "SUMMARY 7 d"}
TOP_UP_AHEAD_S = 540  # the importer refuses samples more than 10 minutes ahead


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, deadline_s: float = 90, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers below 500; RuntimeError after ``deadline_s`` or if ``proc`` exits."""
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up within {deadline_s} s")


class Proc:
    """A child process with its log in ``log``; ``stop()`` sends SIGTERM (engines flush on it)."""

    def __init__(self, args: list[str], log: Path, ready_url: str, cwd: Path | None = None) -> None:
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        wait_http(ready_url, proc=self.proc)

    def stop(self) -> None:
        """SIGTERM, wait up to 60 s, then SIGKILL."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def victoria(root: Path, dedup: bool = True) -> tuple[Proc, str]:
    """A VictoriaMetrics on loopback with its data in ``root/data`` (flags as in docs/store.md, but with
    its query cache, which the ``nocache=1`` runs bypass; ``dedup=False`` drops
    ``-dedup.minScrapeInterval``, which our write path needs and the peers' reference run did not
    have); returns the process and its base URL."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [
        "victoria-metrics",
        f"-storageDataPath={root / 'data'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        "-search.latencyOffset=0s",
        *(["-dedup.minScrapeInterval=1ms"] if dedup else []),
    ]
    url = f"http://127.0.0.1:{port}"
    return Proc(args, root / "engine.log", url + "/health"), url


def prometheus(root: Path, data: Path) -> tuple[Proc, str]:
    """Prometheus on loopback over the TSDB in ``data`` (retention 100 y); the process and its URL."""
    port = free_port()
    config = root / "prometheus.yml"
    config.write_text("global: {}\n")
    args = [
        "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    url = f"http://127.0.0.1:{port}"
    return Proc(args, root / "engine.log", url + "/-/ready"), url


def dir_bytes(path: Path) -> int:
    """Total size of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def generate(shared: Path, out: Path, days: float, end_s: int) -> None:
    """``gen_w1.py out days end_s``, run from the shared bench directory (skipped when ``out`` exists)."""
    if out.exists():
        print(f"reusing {out}")
        return
    t = time.perf_counter()
    tmp = out.with_suffix(".partial")
    subprocess.run([sys.executable, "gen_w1.py", str(tmp), str(days), str(end_s)], cwd=shared, check=True)
    tmp.rename(out)
    print(f"generated {out.name}: {out.stat().st_size:,} B in {time.perf_counter() - t:.0f} s")


def import_both(path: Path, duck: DuckDBStore, engine: PrometheusStore) -> dict[str, float]:
    """Parse ``path`` once with our import path and append every batch to both stores.

    Returns seconds spent parsing (``parse_s``), in each store's ``append`` (``duckdb_s``, ``engine_s``),
    waiting for the engine to take the queue (``flush_s``), and the samples read (``samples``)."""
    labels = {"model_id": "m1", "model_name": "m1"}  # the file's deployment_id and replica labels stay
    spent = {"parse_s": 0.0, "duckdb_s": 0.0, "engine_s": 0.0, "flush_s": 0.0, "samples": 0.0}
    batches = iter_backfill(path, labels)
    while True:
        t0 = time.perf_counter()
        batch = next(batches, None)
        t1 = time.perf_counter()
        spent["parse_s"] += t1 - t0
        if batch is None:
            break
        duck.append(batch)
        t2 = time.perf_counter()
        engine.append(batch)
        spent["duckdb_s"] += t2 - t1
        spent["engine_s"] += time.perf_counter() - t2
        spent["samples"] += len(batch)
    t = time.perf_counter()
    if not engine.flush(1800):
        raise RuntimeError("VictoriaMetrics did not take every sample within 30 minutes")
    spent["flush_s"] = time.perf_counter() - t
    return spent


def import_reference(path: Path, url: str) -> float:
    """Stream ``path`` to VictoriaMetrics' ``/api/v1/import/prometheus`` with timestamps in ms; seconds."""

    def body() -> Iterator[bytes]:
        rest = b""
        with open(path, "rb") as f:
            while block := f.read(8 << 20):
                block = rest + block
                cut = block.rfind(b"\n") + 1
                rest = block[cut:]
                yield re.sub(rb" (\d+)\n", rb" \g<1>000\n", block[:cut])
        if rest:
            yield rest

    t = time.perf_counter()
    httpx.post(url + "/api/v1/import/prometheus", content=body(), timeout=None).raise_for_status()
    return time.perf_counter() - t


def _iso(s: int) -> str:
    return datetime.fromtimestamp(s, UTC).isoformat().replace("+00:00", "Z")


def write_config(path: Path, data_dir: Path, port: int, first_s: int, store: dict[str, Any]) -> None:
    """A service config: model m1 with d1-d3, ``production`` served by all three from before the data."""
    promotions = [
        {"deployment": "d1", "at": _iso(first_s - 3)},
        {"deployment": "d2", "at": _iso(first_s - 2), "percent": 50},  # rolling: d1 and d2 serve
        {"deployment": "d3", "at": _iso(first_s - 1), "percent": 50},  # rolling again: d1, d2 and d3
    ]
    path.write_text(yaml.safe_dump(service_config(data_dir, port, promotions, store), sort_keys=False))


def api_params(end_s: int) -> dict[str, dict[str, Any]]:
    """Query parameters of the four questions (SERIES and SUMMARY windows end at ``end_s``)."""
    end = end_s * 1000
    return {
        "CURRENT": {"mode": "CURRENT"},  # first: the top-up ends a few minutes from now
        "SERIES 7 d": {
            "mode": "SERIES",
            "start_epoch_millis": end - 7 * DAY_S * 1000,
            "end_epoch_millis": end,
        },
        "SERIES 1 h": {"mode": "SERIES", "start_epoch_millis": end - 3_600_000, "end_epoch_millis": end},
        "SUMMARY 7 d": {
            "mode": "SUMMARY",
            "start_epoch_millis": end - 7 * DAY_S * 1000,
            "end_epoch_millis": end,
        },
    }


def time_api(cfg: Path, log: Path, port: int, end_s: int, runs: int) -> dict[str, Any]:
    """Start ``servemetrics serve --config cfg`` and time the questions; {question: (first, p50, p95)}
    plus ``"answers"``: {question: the JSON answer}."""
    url = f"http://127.0.0.1:{port}/v1/models/m1/environments/production/metrics"
    headers = {"Authorization": f"Api-Key {API_KEY}"}
    serve = Proc(
        [sys.executable, "-m", "servemetrics", "serve", "--config", str(cfg)],
        log,
        f"http://127.0.0.1:{port}/healthz",
        cwd=REPO,
    )
    out: dict[str, Any] = {"answers": {}}
    try:
        with httpx.Client(timeout=120, headers=headers) as client:
            for name, params in api_params(end_s).items():
                answer = client.get(url, params=params)
                answer.raise_for_status()
                out["answers"][name] = answer.json()
                out[name] = timed(partial(client.get, url, params=params), runs)
                filled, total = count_values(answer.json())
                print(
                    f"  {name:12s} first {out[name][0]:8.1f}  p50 {out[name][1]:8.1f}  "
                    f"p95 {out[name][2]:8.1f} ms  ({filled} of {total} values non-null)"
                )
    finally:
        serve.stop()
    return out


def count_values(doc: dict[str, Any]) -> tuple[int, int]:
    """Non-null and all cells of ``metric_values[*].values``."""
    cells = [c for vs in doc.get("metric_values", []) for row in vs.get("values", []) for c in row]
    return sum(c is not None for c in cells), len(cells)


def max_rel_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Largest relative difference between the numeric cells of two answers of the same shape (inf when
    their shapes or nulls differ)."""
    cells_a = [c for vs in a["metric_values"] for row in vs["values"] for c in row]
    cells_b = [c for vs in b["metric_values"] for row in vs["values"] for c in row]
    if len(cells_a) != len(cells_b):
        return math.inf
    worst = 0.0
    for x, y in zip(cells_a, cells_b, strict=True):
        if (x is None) != (y is None):
            return math.inf
        if x is not None and x != y:
            worst = max(worst, abs(x - y) / max(abs(x), abs(y)))
    return worst


def prom_bench(shared: Path, url: str, end_s: int, runs: int, *extra: str) -> dict[str, float]:
    """``prom_bench.py url end runs extra...`` from the shared directory; {question: p50 ms}."""
    done = subprocess.run(
        [sys.executable, "prom_bench.py", url, str(end_s), str(runs), *extra],
        cwd=shared,
        check=True,
        capture_output=True,
        text=True,
    )
    out = {}
    for line in done.stdout.splitlines():
        head, _, rest = line.partition(":")
        key = "CURRENT" if head.startswith("CURRENT") else PROM_BENCH_NAMES.get(" ".join(head.split()[:2]))
        if key:
            out[key] = float(rest.split()[1])
    print(f"  prom_bench {url} {' '.join(extra)}: {out}")
    return out


def _ratio(r: float) -> str:
    return f"{r:.2f}" if r >= 0.1 else f"{r:.3f}"


def table(cols: dict[str, dict[str, float]], bps: dict[str, float]) -> str:
    """The Markdown table: p50 ms per question and store, the ratios ours / engine, bytes per sample."""
    names = list(cols)
    ratios = [
        ("ours DuckDB / VM nocache", "ours, DuckDB", "VictoriaMetrics, nocache=1"),
        ("ours DuckDB / Prometheus", "ours, DuckDB", "Prometheus"),
        ("ours on VM / VM nocache", "ours, on VictoriaMetrics", "VictoriaMetrics, nocache=1"),
    ]
    ratios = [r for r in ratios if r[1] in cols and r[2] in cols]
    lines = [
        "| question (p50 ms) | " + " | ".join(names) + " | " + " | ".join(r[0] for r in ratios) + " |",
        "|---" * (1 + len(names) + len(ratios)) + "|",
    ]

    def cell(v: float | None) -> str:
        return "—" if v is None else f"{v:,.1f}"

    for q in QUESTIONS:
        row = [cell(cols[n].get(q)) for n in names]
        for _, a, b in ratios:
            x, y = cols[a].get(q), cols[b].get(q)
            row.append("—" if x is None or not y else _ratio(x / y))
        lines.append(f"| {q} | " + " | ".join(row) + " |")
    row = [f"{bps[n]:.2f} B" if n in bps else "—" for n in names]
    for _, a, b in ratios:
        row.append(_ratio(bps[a] / bps[b]) if a in bps and b in bps else "—")
    lines.append("| disk per sample | " + " | ".join(row) + " |")
    return "\n".join(lines)


def vm_store(vm_url: str, buffer_dir: Path) -> PrometheusStore:
    """Our engine store on the VictoriaMetrics at ``vm_url`` (the ``store: kind prometheus`` path)."""
    return PrometheusStore(
        EngineOptions(Flavor.VICTORIAMETRICS, vm_url, vm_url + "/api/v1/write", buffer_dir)
    )


def load_ours(run: Path, w1: Path, vm_url: str) -> dict[str, float]:
    """Import W1 into both of our stores, unless ``run/import.json`` says it was done; its figures."""
    done = run / "import.json"
    if done.exists():
        spent: dict[str, float] = json.loads(done.read_text())
        print(f"reusing the import of {run}: {spent}")
        return spent
    (run / "ours-duckdb").mkdir(parents=True)
    duck = DuckDBStore(run / "ours-duckdb" / "samples.duckdb")
    engine = vm_store(vm_url, run / "ours-vm" / "buffer")
    print("importing through our import path into DuckDB and VictoriaMetrics (one parse)...")
    spent = import_both(w1, duck, engine)
    duck.checkpoint()
    spent["duckdb_bytes"] = duck.stats().bytes  # both files and their WALs
    duck.close()
    engine.close()
    n = spent["samples"]
    print(
        f"  {n:,.0f} samples; parse + adapters {spent['parse_s']:.0f} s ({n / spent['parse_s']:,.0f}/s); "
        f"DuckDB append {spent['duckdb_s']:.1f} s ({n / spent['duckdb_s']:,.0f}/s); remote_write queue "
        f"{spent['engine_s']:.1f} s + waiting for VictoriaMetrics {spent['flush_s']:.1f} s; DuckDB files "
        f"after checkpoint {spent['duckdb_bytes']:,.0f} B = {spent['duckdb_bytes'] / n:.3f} B/sample"
    )
    done.write_text(json.dumps(spent))
    return spent


def top_up(shared: Path, run: Path, vm_url: str, end_s: int) -> None:
    """Append W1 from just after the data (or the previous top-up) to 9 minutes from now to both stores,
    so that CURRENT (the service's last 5 minutes) has data. It starts at least 30 s after ``end_s``: the
    windows that end there see none of it (PromQL includes a sample at the evaluation time itself)."""
    mark = run / "top_up_end"
    start = max(end_s, int(mark.read_text()) if mark.exists() else 0) + 30
    top_end = (int(time.time()) + TOP_UP_AHEAD_S) // 15 * 15
    top = run / f"topup_{top_end}.om"
    days = (top_end - start) / DAY_S
    subprocess.run(
        [sys.executable, "gen_w1.py", str(top), str(days), str(top_end)],
        cwd=shared,
        check=True,
        capture_output=True,
    )
    duck = DuckDBStore(run / "ours-duckdb" / "samples.duckdb")
    engine = vm_store(vm_url, run / "ours-vm" / "buffer")
    spent = import_both(top, duck, engine)
    duck.close()
    engine.close()
    top.unlink()
    mark.write_text(str(top_end))
    httpx.get(vm_url + "/internal/force_flush").raise_for_status()
    time.sleep(2)
    print(f"top-up: {spent['samples']:,.0f} samples up to {_iso(top_end)}")


def time_ours(run: Path, vm_url: str, first_s: int, end_s: int, runs: int) -> dict[str, dict[str, float]]:
    """Our HTTP API on DuckDB and on VictoriaMetrics: {column: {question: p50 ms}}; checks that the two
    stores give the same answers."""
    print("our HTTP API on DuckDB:")
    port = free_port()
    write_config(run / "duckdb.yaml", run / "ours-duckdb", port, first_s, {"kind": "duckdb"})
    ours_duck = time_api(run / "duckdb.yaml", run / "serve-duckdb.log", port, end_s, runs)
    print("our HTTP API on VictoriaMetrics:")
    port = free_port()
    store = {
        "kind": "prometheus",
        "flavor": "victoriametrics",
        "query_url": vm_url,
        "remote_write_url": vm_url + "/api/v1/write",
    }
    write_config(run / "vm.yaml", run / "ours-vm", port, first_s, store)
    ours_vm = time_api(run / "vm.yaml", run / "serve-vm.log", port, end_s, runs)
    summary = ours_duck["answers"]["SUMMARY 7 d"]["metric_values"][0]["values"]
    print(f"  SUMMARY 7 d on DuckDB: {summary}")  # replicas: 24 (3 deployments x 8)
    for q in QUESTIONS:
        diff = max_rel_diff(ours_duck["answers"][q], ours_vm["answers"][q])
        when = " (asked at different instants: the last 5 minutes differ)" if q == "CURRENT" else ""
        print(f"  {q}: largest relative difference DuckDB vs VictoriaMetrics answers {diff:.2e}{when}")
    return {
        "ours, DuckDB": {q: ours_duck[q][1] for q in QUESTIONS},
        "ours, on VictoriaMetrics": {q: ours_vm[q][1] for q in QUESTIONS},
    }


def load_prometheus(run: Path, w1: Path) -> Path:
    """The TSDB made by ``promtool tsdb create-blocks-from openmetrics --max-block-duration=24h``."""
    tsdb = run / "prometheus" / "data"
    if tsdb.exists():
        return tsdb
    print("promtool tsdb create-blocks-from openmetrics --max-block-duration=24h ...")
    tsdb.mkdir(parents=True)
    t = time.perf_counter()
    cmd = [
        "promtool",
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        "--max-block-duration=24h",
        str(w1),
        str(tsdb),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    print(f"  {time.perf_counter() - t:.0f} s; {dir_bytes(tsdb):,} B")
    (run / "prometheus" / "bytes").write_text(str(dir_bytes(tsdb)))  # before Prometheus compacts
    return tsdb


def time_engines(
    shared: Path, run: Path, w1: Path, vm_url: str, end_s: int, runs: int, reference: bool
) -> dict[str, dict[str, float]]:
    """prom_bench.py on the VictoriaMetrics we filled, on Prometheus and (``reference``) on a
    VictoriaMetrics filled by its own importer: {column: {question: p50 ms}}."""
    print("raw PromQL (prom_bench.py) on the VictoriaMetrics our write path filled:")
    cols = {
        "VictoriaMetrics, nocache=1": prom_bench(shared, vm_url, end_s, runs, "nocache=1"),
        "VictoriaMetrics, cache": prom_bench(shared, vm_url, end_s, runs),
    }
    tsdb = load_prometheus(run, w1)
    prom, prom_url = prometheus(run / "prometheus", tsdb)
    try:
        cols["Prometheus"] = prom_bench(shared, prom_url, end_s, runs)
    finally:
        prom.stop()
    if reference:
        fresh = not (run / "vm-reference" / "data").exists()
        ref, ref_url = victoria(run / "vm-reference", dedup=False)
        try:
            if fresh:
                took = import_reference(w1, ref_url)
                print(f"VictoriaMetrics' own /api/v1/import/prometheus: {took:.0f} s")
                httpx.get(ref_url + "/internal/force_flush").raise_for_status()
                time.sleep(2)
            cols["VM own import, nocache=1"] = prom_bench(shared, ref_url, end_s, runs, "nocache=1")
        finally:
            ref.stop()
    return cols


def disk(run: Path, duckdb_bytes: float, n: float) -> dict[str, float]:
    """Bytes per sample per column: DuckDB after checkpoint (at import); engines' data directories
    (VictoriaMetrics stopped; they also hold the top-ups, under 1 % of W1)."""
    out = {
        "ours, DuckDB": duckdb_bytes / n,
        "Prometheus": int((run / "prometheus" / "bytes").read_text()) / n,
    }
    vm = dir_bytes(run / "vm-ours" / "data") / n
    out["ours, on VictoriaMetrics"] = out["VictoriaMetrics, nocache=1"] = vm
    if (run / "vm-reference" / "data").exists():
        out["VM own import, nocache=1"] = dir_bytes(run / "vm-reference" / "data") / n
    return out


def ingest_rows(run: Path, w1: Path, n_readers: int, seconds: float) -> dict[str, Any]:
    """The ingest and readers rows, in ``run/ingest``: ``remote_write_bench.remote_write_row`` (ours and
    VictoriaMetrics, each fed ``w1`` by a real vmagent) and ``readers_bench.reader_rows`` on the store it
    fed, with the load average after each part."""
    from readers_bench import reader_rows
    from remote_write_bench import remote_write_row

    where = run / "ingest"
    print("remote_write of W1 by a vmagent: ours, then VictoriaMetrics ...")
    rw = remote_write_row(where, w1)
    print(
        f"  ours {rw['ours']['samples_per_s']:,.0f}/s, "
        f"VictoriaMetrics {rw['victoriametrics']['samples_per_s']:,.0f}/s"
    )
    print(f"SERIES 24 h from 1 and {n_readers} readers ...")
    readers = reader_rows(where, int(rw["last_s"]), n_readers, seconds)
    return {"remote_write": rw, "readers": readers, "readers_load_average": os.getloadavg()}


def ingest_table(rows: dict[str, Any]) -> str:
    """The Markdown table of ``ingest_rows``: rates and ratios against VictoriaMetrics in the same run, the
    readers' throughput against one reader's, ``/healthz`` latency meanwhile, and the load averages."""
    rw, rd = rows["remote_write"], rows["readers"]
    ours, vm = rw["ours"]["samples_per_s"], rw["victoriametrics"]["samples_per_s"]
    one = next(iter(rd.values()))["answers_per_s"]
    lines = [
        "| row | ours | VictoriaMetrics | ratio |",
        "|---|---|---|---|",
        f"| remote_write by a vmagent ({rw['samples']:,} samples) | {ours:,.0f} samples/s "
        f"| {vm:,.0f} samples/s "
        f"| VM / ours {_ratio(vm / ours) if ours else '—'} |",
    ]
    for name, r in rd.items():
        lines.append(
            f"| SERIES 24 h, {name} | {r['answers_per_s']:.1f} answers/s, p50 {r['p50_ms']:,.0f} ms, "
            f"p99 {r['p99_ms']:,.0f} ms, /healthz p50 {r['healthz_p50_ms']:.1f} ms p99 "
            f"{r['healthz_p99_ms']:.1f} ms | "
            f"| x {_ratio(r['answers_per_s'] / one) if one else '—'} of 1 reader |"
        )
    la, lr = rw["load_average"], rows["readers_load_average"]
    lines.append(
        f"\nload average after remote_write {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f}, after the readers "
        f"{lr[0]:.1f} / {lr[1]:.1f} / {lr[2]:.1f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "bench")
    ap.add_argument("--work-dir", type=Path, default=None, help="generated data (default: a temp dir)")
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--end", type=int, default=None, help="end of the data, epoch s (default: last hour)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-reference", action="store_true", help="skip VictoriaMetrics' own import")
    ap.add_argument("--reuse-run", type=Path, default=None, help="a run directory: time again, no import")
    ap.add_argument("--ingest", action="store_true", help="also the remote_write and 50-reader rows")
    ap.add_argument("--readers", type=int, default=50, help="readers of the --ingest rows")
    ap.add_argument("--reader-seconds", type=float, default=20.0, help="length of each reader row")
    args = ap.parse_args(argv)
    shared = args.shared.resolve()
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="w1-bench-"))).resolve()
    if work.is_relative_to(REPO):
        ap.error("--work-dir must be outside the repository")
    work.mkdir(parents=True, exist_ok=True)
    end_s = args.end or int(time.time()) // 3600 * 3600
    first_s = end_s - int(args.days * DAY_S)
    print(f"work dir {work}; W1 {args.days:g} days ending {_iso(end_s)}")
    w1 = work / f"w1_{args.days:g}d_{end_s}.om"
    generate(shared, w1, args.days, end_s)
    run = args.reuse_run.resolve() if args.reuse_run else work / f"run_{int(time.time())}"
    vm, vm_url = victoria(run / "vm-ours")
    try:
        spent = load_ours(run, w1, vm_url)
        top_up(shared, run, vm_url, end_s)
        cols = time_ours(run, vm_url, first_s, end_s, args.runs)
        cols.update(time_engines(shared, run, w1, vm_url, end_s, args.runs, not args.no_reference))
    finally:
        vm.stop()
    n = spent["samples"]
    print(f"\nW1, {args.days:g} days, {n:,.0f} samples; p50 over {args.runs} runs after a warm-up:\n")
    print(table(cols, disk(run, spent["duckdb_bytes"], n)))
    print(f"\nload average {os.getloadavg()}")
    if args.ingest:
        rows = ingest_rows(run, w1, args.readers, args.reader_seconds)
        print(f"\nW1, {args.days:g} days: ingest and readers\n")
        print(ingest_table(rows))
        (run / "ingest.json").write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
