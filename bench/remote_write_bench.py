"""remote_write ingest fed by a real vmagent: ``servemetrics serve`` (DuckDB store) against VictoriaMetrics.

W1 (``shared/bench/gen_w1.py``, ``--days`` of it ending now) is rewritten with millisecond timestamps
and posted to a vmagent's ``/api/v1/import/prometheus``; the vmagent sends it by remote_write
(``-remoteWrite.url``, with ``Authorization: Api-Key`` for ours) to one receiver at a time: first
``servemetrics serve``, then a VictoriaMetrics, each fed by its own fresh vmagent from the same file. A
receiver's rate is the samples it counted as stored (ours: ``/service/metrics``
``servemetrics_samples_appended_total{path="remote_write"}``; VictoriaMetrics:
``vm_rows_inserted_total{type="promremotewrite"}``) over the time
from the post to the last one. ``remote_write_row(...)`` is the row ``w1_bench.py`` can print.

    python bench/remote_write_bench.py [--days 1] [--run DIR]

Needs ``/usr/bin/vmagent`` and ``victoria-metrics`` (``scripts/install``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from w1_bench import API_KEY, Proc, free_port, generate, victoria, write_config  # noqa: E402

OURS_COUNTER = re.compile(rb'^servemetrics_samples_appended_total\{path="remote_write"\} (\S+)$', re.M)
VM_COUNTER = re.compile(rb'^vm_rows_inserted_total\{type="promremotewrite"\} (\S+)$', re.M)
AUTH = {"Authorization": f"Api-Key {API_KEY}"}
IDLE_S = 20.0
"""A receiver whose count has not moved for this long (and is short of the file) has stopped taking."""


def to_prometheus_text(om: Path, out: Path) -> tuple[int, int, int]:
    """``om`` (W1, timestamps in s) as Prometheus text with ms timestamps in ``out``: ``(samples, first
    ts s, last ts s)``."""
    n, first, last = 0, None, 0
    with open(om, "rb") as src, open(out, "wb") as dst:
        for line in src:
            if line.startswith(b"#"):
                continue
            head, _, ts = line.rstrip(b"\n").rpartition(b" ")
            first = int(ts) if first is None else first
            last = max(last, int(ts))
            dst.write(head + b" " + ts + b"000\n")
            n += 1
    return n, first or 0, last


def counter(url: str, pattern: re.Pattern[bytes], headers: dict[str, str] | None = None) -> float:
    """The value ``pattern`` finds in ``url``'s Prometheus text (0 when absent or unreachable)."""
    try:
        found = pattern.search(httpx.get(url, timeout=10, headers=headers).content)
    except httpx.HTTPError:
        return 0.0
    return float(found.group(1)) if found else 0.0


def vmagent(run: Path, name: str, write_url: str, headers: str = "") -> tuple[Proc, str]:
    """A fresh vmagent sending to ``write_url`` (its queue in ``run/name``); the process and its URL."""
    port = free_port()
    args = [
        "/usr/bin/vmagent",
        f"-httpListenAddr=127.0.0.1:{port}",
        f"-remoteWrite.url={write_url}",
        f"-remoteWrite.tmpDataPath={run / name}",
        "-remoteWrite.showURL",
        *([f"-remoteWrite.headers={headers}"] if headers else []),
    ]
    url = f"http://127.0.0.1:{port}"
    return Proc(args, run / f"{name}.log", url + "/health"), url


def feed(
    text: Path, agent_url: str, stored: Callable[[], float], n: int, deadline_s: float
) -> dict[str, float]:
    """Post ``text`` to the vmagent and poll ``stored()`` until it reaches ``n`` (or stops moving for
    ``IDLE_S``, or ``deadline_s`` passes): ``{"samples", "seconds", "samples_per_s"}``."""
    start = before = stored()
    t0 = time.perf_counter()
    with open(text, "rb") as f:
        httpx.post(agent_url + "/api/v1/import/prometheus", content=f, timeout=None).raise_for_status()
    last_t, last = time.perf_counter(), before
    stop = t0 + deadline_s
    while time.perf_counter() < stop:
        now = stored()
        if now != last:
            last_t, last = time.perf_counter(), now
        if now - start >= n or time.perf_counter() - last_t > IDLE_S:
            break
        time.sleep(0.2)
    took = last_t - t0
    got = last - start
    return {"samples": got, "seconds": took, "samples_per_s": got / took if took > 0 else 0.0}


def ours(run: Path, text: Path, n: int, first_s: int, deadline_s: float) -> dict[str, float]:
    """Start ``servemetrics serve`` (DuckDB in ``run/ours``) and a vmagent feeding it ``text``."""
    port = free_port()
    cfg = run / "ours.yaml"
    (run / "ours").mkdir(parents=True, exist_ok=True)
    write_config(cfg, run / "ours", port, first_s, {"kind": "duckdb"})
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "servemetrics", "serve", "--config", str(cfg)]
    serve = Proc(args, run / "ours.log", base + "/healthz")
    try:
        header = f"Authorization: {AUTH['Authorization']}"
        agent, agent_url = vmagent(run, "vmagent-ours", base + "/api/v1/write", header)
        try:
            stored = partial(counter, base + "/service/metrics", OURS_COUNTER)
            return feed(text, agent_url, stored, n, deadline_s)
        finally:
            agent.stop()
    finally:
        serve.stop()


def engine(run: Path, text: Path, n: int, deadline_s: float) -> dict[str, float]:
    """Start a VictoriaMetrics (``run/vm``) and a vmagent feeding it ``text``."""
    vm, vm_url = victoria(run / "vm", dedup=False)
    try:
        agent, agent_url = vmagent(run, "vmagent-vm", vm_url + "/api/v1/write")
        try:
            return feed(text, agent_url, lambda: counter(vm_url + "/metrics", VM_COUNTER), n, deadline_s)
        finally:
            agent.stop()
    finally:
        vm.stop()


def remote_write_row(run: Path, w1_om: Path, deadline_s: float = 1800) -> dict[str, Any]:
    """The remote_write row of the W1 table: ours and VictoriaMetrics fed by a vmagent with ``w1_om``
    (W1 as ``gen_w1.py`` writes it), in this order, in ``run``. Returns ``{"samples": in the file,
    "last_s": its last timestamp (epoch s),
    "ours": feed(...), "victoriametrics": feed(...), "ratio": VictoriaMetrics' rate / ours,
    "load_average": os.getloadavg() at the end}``."""
    run.mkdir(parents=True, exist_ok=True)
    text = run / "w1.prom"
    n, first_s, last_s = to_prometheus_text(w1_om, text)
    row: dict[str, Any] = {"samples": n, "last_s": last_s}
    row["ours"] = ours(run, text, n, first_s, deadline_s)
    row["victoriametrics"] = engine(run, text, n, deadline_s)
    ours_rate = row["ours"]["samples_per_s"]
    row["ratio"] = row["victoriametrics"]["samples_per_s"] / ours_rate if ours_rate else float("inf")
    row["load_average"] = os.getloadavg()
    return row


def main(argv: list[str] | None = None) -> None:
    """Generate W1 (``--days`` ending at the current minute), run ``remote_write_row`` and print it."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=1.0, help="days of W1 to send (1: 2.64 M samples)")
    ap.add_argument("--run", type=Path, help="working directory (default: a new temporary one)")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "bench")
    args = ap.parse_args(argv)
    run = args.run or Path(tempfile.mkdtemp(prefix="rw-bench-"))
    end_s = int(time.time()) // 60 * 60
    om = run / f"w1-{args.days:g}d.om"
    run.mkdir(parents=True, exist_ok=True)
    generate(args.shared, om, args.days, end_s)
    row = remote_write_row(run, om)
    o, v = row["ours"], row["victoriametrics"]
    print(f"W1 {args.days:g} d: {row['samples']:,} samples by a vmagent's remote_write")
    for name, r in (("ours", o), ("VictoriaMetrics", v)):
        took = f"{r['samples']:>12,.0f} stored in {r['seconds']:7.1f} s"
        print(f"  {name:15s} {took}: {r['samples_per_s']:>10,.0f}/s")
    print(f"  VictoriaMetrics / ours: {row['ratio']:.2f}x; load average {row['load_average']}")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
