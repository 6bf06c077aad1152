"""The demo's replay exporter (``dcgm-replay``): a real dcgm-exporter capture, moving with replica load.

It serves ``GET /<replica>/metrics``: the capture in ``replays/`` (one idle RTX 4000 Ada, provenance in
``replays/README.md``) as the GPU of ``<replica>``, every field driven by one utilisation level
(``gpu_replay``): the fraction of the time since the previous scrape in which the replica was generating,
read from the replica's ``GET /busy`` (``--busy REPLICA=URL``; a replica without one, or one that does
not answer, is an idle GPU: the capture's own values).

``render`` is the generic replay the trainer's kubelet files use: gauges oscillate around their recorded
value (a minute-long wave, phase-shifted per path), counters and histogram series grow from their
recorded value (scaled, so bucket counts stay ordered).

    python -m servemetrics.demo.replay --kind dcgm --port 9400 --busy d1-r1=http://127.0.0.1:9301/busy
"""

from __future__ import annotations

import argparse
import json
import math
import re
import threading
import time
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from servemetrics.demo.busy import utilisation
from servemetrics.demo.gpu_replay import GpuReplay

REPLAYS = Path(__file__).with_name("replays")
FILES = {"dcgm": "dcgm_exporter_k8s_pod_sample.prom"}
_SAMPLE = re.compile(r"^(?P<head>(?P<name>[^\s{]+)(?:\{.*\})?)\s+(?P<value>\S+)(?P<tail>\s+\S+)?$")
_GROWING = {"counter", "histogram", "summary"}


def _families(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"]:
            out[parts[2]] = parts[3]
    return out


def _kind(name: str, families: dict[str, str]) -> str:
    best = max((f for f in families if name.startswith(f)), key=len, default=None)
    return families[best] if best else "untyped"


def _gauge(recorded: float, t: float, phase: float) -> float:
    return recorded * (1 + 0.3 * math.sin(2 * math.pi * t / 60 + phase))


def render(text: str, t: float, key: str) -> str:
    """``text`` with its sample values moved to ``t`` seconds after the replay started, for path ``key``."""
    lines = text.splitlines()
    families = _families(lines)
    phase = (zlib.crc32(key.encode()) % 628) / 100
    out = []
    for line in lines:
        m = _SAMPLE.match(line)
        if line.startswith("#") or not m:
            out.append(line)
            continue
        name, recorded = m["name"], float(m["value"])
        if _kind(name, families) in _GROWING:
            value = recorded * (1 + t / 120) + (0 if name.endswith("_bucket") else t / 10)
        else:
            value = _gauge(recorded, t, phase)
        out.append(f"{m['head']} {value:.6g}")
    return "\n".join(out) + "\n"


class Gpus:
    """The GPU of each replica: its ``GpuReplay`` and the last ``(time, busy_seconds)`` reading of its
    ``/busy`` URL (``busy``: replica id → URL)."""

    def __init__(self, text: str, busy: dict[str, str]) -> None:
        self.text, self.busy = text, busy
        self.gpus: dict[str, GpuReplay] = {}
        self.readings: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def _read(self, replica: str) -> tuple[float, float] | None:
        url = self.busy.get(replica)
        if url is None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:  # noqa: S310 - a loopback URL of ours
                busy = float(json.loads(resp.read())["busy_seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return time.monotonic(), busy

    def render(self, replica: str) -> str:
        """The capture as ``replica``'s GPU now: utilisation since the previous call (0 the first time,
        or when its ``/busy`` does not answer)."""
        reading = self._read(replica)
        with self.lock:
            gpu = self.gpus.setdefault(replica, GpuReplay(self.text))
            before = self.readings.get(replica)
            u = utilisation(before, reading) if before and reading else 0.0
            if reading:
                self.readings[replica] = reading
            return gpu.render(u, time.monotonic())


class Handler(BaseHTTPRequestHandler):
    """``GET /<replica>/metrics`` only."""

    protocol_version = "HTTP/1.1"
    gpus = Gpus("", {})

    def do_GET(self) -> None:  # noqa: N802
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) != 2 or parts[1] != "metrics":
            body, status = b"GET /<replica>/metrics\n", 404
        else:
            body, status = self.gpus.render(parts[0]).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _busy(value: str) -> tuple[str, str]:
    replica, _, url = value.partition("=")
    if not replica or not url.startswith("http"):
        raise argparse.ArgumentTypeError(
            f"{value!r}: write REPLICA=URL, e.g. d1-r1=http://127.0.0.1:9301/busy"
        )
    return replica, url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Replay a real dcgm-exporter capture as each replica's GPU, moving with its load."
    )
    parser.add_argument("--kind", choices=sorted(FILES), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--busy", type=_busy, action="append", default=[], help="REPLICA=URL of its GET /busy"
    )
    args = parser.parse_args(argv)
    Handler.gpus = Gpus((REPLAYS / FILES[args.kind]).read_text(), dict(args.busy))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
