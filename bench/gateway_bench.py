"""Gateway overhead: added latency (p50, p99) against direct calls to the same replica, and requests/s
through one gateway process.

    .venv/bin/python bench/gateway_bench.py [--requests 3000] [--duration 10] [--concurrency 32]
                                            [--out bench/out/gateway] [--no-pin]

It starts ``examples/replica.py`` (one replica) and ``servemetrics serve`` with the gateway on a
generated config (one model, one deployment serving ``production``, ``concurrency_target`` raised to
1,000 through the API so backpressure never queues), then runs a load generator in a separate process:

- *sequential*: one keep-alive connection to the replica and one to the gateway, requests alternating
  between them (so both see the same machine state), ``--requests`` each after 300 warm-ups each.
  Every request is ``POST /predict?tokens=1`` with an 8-byte body; the replica answers one chunked
  token (about 40 bytes). Added latency is the difference of the two distributions' quantiles:
  ``p50(gateway) - p50(direct)`` and ``p99(gateway) - p99(direct)``.
- *throughput*: ``--concurrency`` keep-alive connections, each sending its next request when the
  previous one is answered, for ``--duration`` seconds; requests/s = answered / seconds; first directly
  to the replica (its ceiling), then through the gateway.

The load generator speaks HTTP/1.1 on raw asyncio streams (no client library), so its own cost per
request is small and the same for both targets. Cores (the machine has 2): by default the gateway
process is pinned to CPU 0, the replica and the load generator to CPU 1 (``--no-pin``: the OS decides).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.processes import wait_http  # noqa: E402

KEY = "bench-gateway-key"
BODY = b'{"x": 1}'
DIRECT_PATH = "/predict?tokens=1"
GATEWAY_PATH = "/v1/models/m1/environments/production/predict?tokens=1"


# -- the load generator (runs in its own process) ------------------------------------------------


def _request(host: str, port: int, path: str, auth: bool) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(BODY)}",
    ]
    if auth:
        lines.append(f"Authorization: Api-Key {KEY}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + BODY


_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.I)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding: *chunked", re.I)


class Conn:
    """One keep-alive HTTP/1.1 connection sending one fixed request."""

    def __init__(self, url: str, auth: bool) -> None:
        m = re.fullmatch(r"http://([^:/]+):(\d+)(/.*)", url)
        assert m, url
        self.host, self.port = m.group(1), int(m.group(2))
        self.req = _request(self.host, self.port, m.group(3), auth)

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def send(self) -> int:
        """Send the request, read the whole answer; its status code."""
        self.writer.write(self.req)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = _LENGTH.search(head)
        if length:
            await self.reader.readexactly(int(length.group(1)))
        elif _CHUNKED.search(head):
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        return status


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def sequential(direct: str, gateway: str, n: int, warmup: int) -> dict[str, Any]:
    d, g = Conn(direct, False), Conn(gateway, True)
    await d.open()
    await g.open()
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    for i in range(warmup + n):
        for name, conn in (("direct", d), ("gateway", g)) if i % 2 else (("gateway", g), ("direct", d)):
            t0 = time.perf_counter()
            status = await conn.send()
            dt = time.perf_counter() - t0
            assert status == 200, (name, status)
            if i >= warmup:
                times[name].append(dt)
    out: dict[str, Any] = {}
    for name, xs in times.items():
        out[name] = {
            "p50_ms": _q(xs, 0.5) * 1e3,
            "p99_ms": _q(xs, 0.99) * 1e3,
            "mean_ms": statistics.fmean(xs) * 1e3,
        }
    return out


async def throughput(url: str, auth: bool, concurrency: int, duration: float) -> dict[str, Any]:
    conns = [Conn(url, auth) for _ in range(concurrency)]
    await asyncio.gather(*(c.open() for c in conns))
    for c in conns:  # warm every connection (and the gateway's pool behind it)
        await c.send()
    lat: list[float] = []
    errors = 0
    end = time.perf_counter() + duration

    async def worker(c: Conn) -> None:
        nonlocal errors
        while (t0 := time.perf_counter()) < end:
            if await c.send() != 200:
                errors += 1
            lat.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - started
    return {
        "rps": len(lat) / elapsed,
        "requests": len(lat),
        "errors": errors,
        "p50_ms": _q(lat, 0.5) * 1e3,
        "p99_ms": _q(lat, 0.99) * 1e3,
    }


def load_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["seq", "rps"])
    p.add_argument("--direct")
    p.add_argument("--gateway")
    p.add_argument("--url")
    p.add_argument("--auth", action="store_true")
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--duration", type=float, default=10.0)
    a = p.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if a.mode == "seq":
        result = asyncio.run(sequential(a.direct, a.gateway, a.requests, a.warmup))
    else:
        result = asyncio.run(throughput(a.url, a.auth, a.concurrency, a.duration))
    print(json.dumps(result))


# -- orchestration ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spawn(args: list[str], log: Path, cpu: int | None) -> subprocess.Popen[bytes]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=pin
        )


def run_load(args: list[str], cpu: int | None) -> dict[str, Any]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    out = subprocess.run(
        [sys.executable, __file__, "_load", *args], cwd=ROOT, capture_output=True, check=True, preexec_fn=pin
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=3000, help="sequential requests per target")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of each throughput run")
    p.add_argument("--concurrency", type=int, default=32, help="connections of the throughput runs")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gateway")
    p.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    p.add_argument("--profile", type=Path, help="py-spy flame graph (SVG) of the gateway under load")
    a = p.parse_args()
    gw_cpu, other_cpu = (None, None) if a.no_pin or (os.cpu_count() or 1) < 2 else (0, 1)
    a.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(a.out / "data", ignore_errors=True)  # a fresh registry: the replica's port is new
    rport, sport = free_port(), free_port()
    cfg = {
        "listen": f"127.0.0.1:{sport}",
        "data_dir": str(a.out / "data"),
        "scrape_interval": "15s",
        "organizations": [{"name": "bench", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}],
        "models": [
            {
                "id": "m1",
                "name": "bench",
                "organization": "bench",
                "deployments": [
                    {"id": "d1", "replicas": [{"id": "r1", "targets": [f"http://127.0.0.1:{rport}/metrics"]}]}
                ],
                "environments": [
                    {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
                ],
            }
        ],
    }
    (a.out / "bench.yaml").write_text(yaml.safe_dump(cfg))
    replica = spawn(
        ["examples/replica.py", "--port", str(rport), "--name", "r1"], a.out / "replica.log", other_cpu
    )
    service = spawn(
        ["-m", "servemetrics", "serve", "--config", str(a.out / "bench.yaml")], a.out / "serve.log", gw_cpu
    )
    base, direct = f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{rport}"
    try:
        wait_http(f"{direct}/health")
        wait_http(f"{base}/healthz")
        auth = {"Authorization": f"Api-Key {KEY}"}
        httpx.patch(
            f"{base}/v1/models/m1/deployments/d1/autoscaling_settings",
            headers=auth,
            json={"concurrency_target": 1000},
        ).raise_for_status()
        r = httpx.post(f"{base}{GATEWAY_PATH}", headers=auth, content=BODY, timeout=30)  # waits for health
        assert r.status_code == 200, r.text
        seq = run_load(
            [
                "seq",
                "--direct",
                direct + DIRECT_PATH,
                "--gateway",
                base + GATEWAY_PATH,
                "--requests",
                str(a.requests),
            ],
            other_cpu,
        )
        common = ["--concurrency", str(a.concurrency), "--duration", str(a.duration)]
        rps_direct = run_load(["rps", "--url", direct + DIRECT_PATH, *common], other_cpu)
        spy = None
        if a.profile:
            fmt = "raw" if a.profile.suffix == ".txt" else "flamegraph"
            spy = subprocess.Popen(
                [Path(sys.executable).parent / "py-spy", "record", "-o", str(a.profile), "-f", fmt,
                 "--pid", str(service.pid), "-r", "500", "--nonblocking"]
            )  # fmt: skip
        rps_gateway = run_load(["rps", "--url", base + GATEWAY_PATH, "--auth", *common], other_cpu)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
    finally:
        for proc in (service, replica):
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    d, g = seq["direct"], seq["gateway"]
    rps = (rps_direct, rps_gateway)
    result = {
        "sequential": seq,
        "added_p50_ms": g["p50_ms"] - d["p50_ms"],
        "added_p99_ms": g["p99_ms"] - d["p99_ms"],
        "throughput_direct": rps_direct,
        "throughput_gateway": rps_gateway,
        "pinned": gw_cpu is not None,
    }
    (a.out / "result.json").write_text(json.dumps(result, indent=2))
    pin = "gateway on CPU 0; replica and load generator on CPU 1" if gw_cpu is not None else "not pinned"
    print(f"gateway bench ({pin}); {a.requests} sequential requests per target, POST {DIRECT_PATH}")

    def row(what: str, *cells: str) -> None:
        print(f"{what:<44}" + "".join(f" {c:>12}" for c in cells))

    row("what", "direct", "gateway", "added")
    for q in ("p50", "p99", "mean"):
        dq, gq = d[f"{q}_ms"], g[f"{q}_ms"]
        row(f"sequential {q} (ms)", f"{dq:.3f}", f"{gq:.3f}", f"{gq - dq:.3f}")
    row(f"requests/s, {a.concurrency} connections, {a.duration:g} s", *(f"{r['rps']:.0f}" for r in rps))
    row("  latency p50 / p99 under that load (ms)", *(f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}" for r in rps))
    errors = rps_direct["errors"] + rps_gateway["errors"]
    if errors:
        print(f"non-200 answers under load: {errors}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_load":
        load_main(sys.argv[2:])
    else:
        main()
