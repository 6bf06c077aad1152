"""Dashboard benchmark: time to first complete render of the default graphs over 7 days in headless Chromium.

    .venv/bin/python bench/dashboard_bench.py [--days 7] [--runs 7] [--out bench/out/dashboard]

Builds the core benchmark's W1 dataset (``core_bench.generate``: 3 deployments x 8 replicas at 15 s, with
its promotion timeline) plus a vLLM engine on every replica (``engine_series``: running / waiting, KV-cache
usage, generation tokens, and the TTFT and inter-token latency histograms in vLLM's own bucket layouts,
51 series a replica) into a DuckDB store, serves it with ``python -m servemetrics serve``, and opens
``/#/metrics?model=m1&scope=environment:production&range=7d`` in a fresh Chromium context per run (no
HTTP cache, key already in localStorage). The figure is the page's performance mark
``servemetrics:graphs-drawn`` (set when every visible graph has drawn; docs/dashboard.md), in ms since
navigation start: it includes loading the page and uPlot, the catalog, models, scopes, the SERIES
call of every default metric over 7 days (30 min steps; with the five vLLM graphs shown by default once
``GET .../engines`` has detected vLLM), the histogram bounds, and drawing. Target < 1 s.
Prints each run, then p50. Needs Debian's chromium and uPlot (``bash scripts/install``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from math import erf, sqrt
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import core_bench  # noqa: E402
from core_bench import API_KEY, DEPS, STEP_MS, generate, ingest, write_config  # noqa: E402
from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from servemetrics.store import STORE_FILE  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402
from servemetrics.types import labels_of  # noqa: E402
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

PAGE = "/#/metrics?model=m1&scope=environment:production&range=7d"
MARK = "servemetrics:graphs-drawn"
PHASES = """(() => {
  const r = performance.getEntriesByType('resource');
  const end = (part) => Math.max(...r.filter((e) => e.name.includes(part)).map((e) => e.responseEnd));
  const begin = (part) => Math.min(...r.filter((e) => e.name.includes(part)).map((e) => e.startTime));
  return {dom: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
          catalog: end('/metrics_catalog'), series0: begin('/metrics?'), series: end('/metrics?'),
          scopes: Math.max(...r.filter((e) => e.name.endsWith('/environments')).map((e) => e.responseEnd))};
})()"""
"""Milliseconds since navigation start at which each phase ended (the SERIES calls: first start, last end)."""


TTFT_LE = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0]
TTFT_LE += [40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_LE = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0]
ITL_LE += [80.0]
"""vLLM V1's bucket layouts of ``time_to_first_token_seconds`` and ``inter_token_latency_seconds``."""
ENGINE_SHOWN = {
    "vllm-requests",
    "vllm-kv-cache-usage",
    "vllm-ttft",
    "vllm-inter-token-latency",
    "vllm-output-token-throughput",
}

ENGINE_DRAWN = "window.smDashboard.metrics.inspect().filter((g) => g.group).map((g) => g.id)"


def _histogram(add, name, labels, edges, median, per_step, rng, n) -> None:
    """Cumulative ``_bucket`` / ``_sum`` / ``_count`` columns of a log-normal histogram."""
    e = np.array(edges)
    cdf = 0.5 * (1 + np.vectorize(erf)((np.log(e) - np.log(median)) / (0.6 * sqrt(2))))
    pvals = np.diff(np.concatenate(([0.0], cdf, [1.0])))
    obs = rng.poisson(per_step, n)
    cum = np.cumsum(np.cumsum(rng.multinomial(obs, pvals), axis=1), axis=0).astype(float)
    for j, le in enumerate([*map(str, edges), "+Inf"]):
        add(f"{name}_bucket", {**labels, "le": le}, cum[:, j] if j < len(edges) else cum[:, -1])
    add(f"{name}_sum", labels, np.round(np.cumsum(obs * median * np.exp(0.18)), 6))
    add(f"{name}_count", labels, cum[:, -1].copy())


def engine_series(n: int) -> tuple[list, list[np.ndarray]]:
    """vLLM series of every W1 replica (one engine core each, ``source="vllm"``), ``n`` samples each."""
    rng = np.random.default_rng(13)
    keys: list = []
    cols: list[np.ndarray] = []

    def add(name: str, labels: dict[str, str], values: np.ndarray) -> None:
        keys.append((name, labels_of(labels)))
        cols.append(values)

    for d in DEPS:
        for r in range(8):
            replica = {"model_id": "m1", "deployment_id": d, "replica": f"{d}-r{r}"}
            lab = {**replica, "source": "vllm", "engine": "0"}
            add("vllm:num_requests_running", lab, rng.poisson(6, n).astype(float))
            add("vllm:num_requests_waiting", lab, rng.poisson(0.5, n).astype(float))
            add("vllm:kv_cache_usage_perc", lab, np.round(np.clip(rng.normal(0.4, 0.1, n), 0, 1), 4))
            add("vllm:generation_tokens_total", lab, np.cumsum(rng.poisson(15 * 400, n)).astype(float))
            _histogram(add, "vllm:time_to_first_token_seconds", lab, TTFT_LE, 0.15, 300, rng, n)
            _histogram(add, "vllm:inter_token_latency_seconds", lab, ITL_LE, 0.03, 6000, rng, n)
    return keys, cols


def build(data_dir: Path, days: float) -> int:
    """W1 into a fresh DuckDB store in ``data_dir``; returns the data's end (epoch ms)."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    end_ms = int(time.time() * 1000) // STEP_MS * STEP_MS + STEP_MS
    t = time.perf_counter()
    keys, ts, matrix = generate(days, end_ms)
    engine_keys, engine_cols = engine_series(ts.size)
    keys = keys + engine_keys
    matrix = np.concatenate([matrix, np.stack(engine_cols, axis=1)], axis=1)
    store = DuckDBStore(data_dir / STORE_FILE)
    ingest(store, keys, ts, matrix, 60)
    store.checkpoint()
    store.close()
    print(f"W1: {matrix.size:,} samples in {len(keys)} series, built in {time.perf_counter() - t:.1f} s")
    return end_ms


def serve(out: Path, data_dir: Path, end_ms: int) -> tuple[subprocess.Popen[bytes], str]:
    """``servemetrics serve`` on the data (core_bench's config: model m1, d1-d3, production's promotions)."""
    port = core_bench_free_port()
    cfg = out / "bench.yaml"
    write_config(cfg, data_dir, port, end_ms)
    log = open(out / "serve.log", "wb")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(
        [sys.executable, "-m", "servemetrics", "serve", "--config", str(cfg)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the service did not come up; see {out / 'serve.log'}")


def core_bench_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(base: str, runs: int, shot: Path | None) -> list[float]:
    """Milliseconds from navigation start to the mark, one fresh context per run (after one warm-up)."""
    out: list[float] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        for i in range(runs + 1):
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(
                f"localStorage.setItem('servemetrics.apiKey', JSON.stringify({API_KEY!r}))"
            )
            page = context.new_page()
            page.goto(base + PAGE)
            page.wait_for_function(
                "document.getElementById('graphs').dataset.renderState === 'done'", timeout=60_000
            )
            ms = page.evaluate(f"performance.getEntriesByName({MARK!r})[0].startTime")
            graphs = page.locator("#graphs section.graph").count()
            engine = set(page.evaluate(ENGINE_DRAWN))
            if engine != ENGINE_SHOWN:
                raise SystemExit(f"the engine graphs drawn are {sorted(engine)}, not {sorted(ENGINE_SHOWN)}")
            t = page.evaluate(PHASES)
            label = "warm-up" if i == 0 else f"run {i}"
            print(
                f"  {label:8s} {ms:6.0f} ms to all {graphs} graphs drawn ({len(engine)} engine)"
                f"  (DOMContentLoaded {t['dom']:.0f},"
                f" catalog {t['catalog']:.0f}, scopes {t['scopes']:.0f},"
                f" SERIES {t['series0']:.0f}-{t['series']:.0f})"
            )
            if i > 0:
                out.append(ms)
            context.close()
        if shot is not None:
            screenshot_with_events(browser, base, shot)
        browser.close()
    return out


def screenshot_with_events(browser: Browser, base: str, shot: Path) -> None:
    """The page over 7 days with the Events overlay on (W1's promotions), not timed."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(
        f"localStorage.setItem('servemetrics.apiKey', JSON.stringify({API_KEY!r}));"
        "localStorage.setItem('servemetrics.prefs', JSON.stringify({showEvents: true}));"
    )
    page = context.new_page()
    page.goto(base + PAGE)
    page.wait_for_selector(".event-marker")
    box = page.locator("#graphs .u-over").first.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.62, box["y"] + box["height"] / 2)  # legends show values
    page.screenshot(path=str(shot), full_page=True)
    context.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "dashboard")
    ap.add_argument("--screenshot", type=Path, default=ROOT / "artifacts" / "dashboard-7d.png")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.screenshot.parent.mkdir(parents=True, exist_ok=True)
    end_ms = build(out / "data", args.days)
    proc, base = serve(out, out / "data", end_ms)
    try:
        print(f"time to first complete render, {args.days:g} days, {args.runs} runs after a warm-up:")
        ms = measure(base, args.runs, args.screenshot)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(
        f"p50 {statistics.median(ms):.0f} ms   min {min(ms):.0f} ms   max {max(ms):.0f} ms"
        "   (target < 1000 ms)"
    )
    print(f"screenshot: {args.screenshot}")


if __name__ == "__main__":
    assert core_bench.DAY == 86_400_000
    main()
