"""The demo's replay exporter (``dcgm-replay``): real exposition text with moving values.

It serves ``GET /<replica>/metrics`` (any path ending in ``/metrics``): the fixture file of its kind in
``replays/`` (real dcgm-exporter output, provenance in ``replays/README.md``) with every sample
value rewritten for the current time: gauges oscillate around their recorded value (a minute-long wave,
phase-shifted per path, so replicas differ), counters and histogram series grow from their recorded value
(scaled, so bucket counts stay ordered). A utilisation gauge recorded as 0 (an idle GPU) oscillates around
45 % instead, so the demo shows a moving GPU. Names, labels and HELP/TYPE are served as recorded.

    python -m servemetrics.demo.replay --kind dcgm --port 9400
"""

from __future__ import annotations

import argparse
import math
import re
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


def _gauge(name: str, recorded: float, t: float, phase: float) -> float:
    wave = math.sin(2 * math.pi * t / 60 + phase)
    percent = name.endswith("_UTIL")
    ratio = name.endswith("_ACTIVE") or name.endswith("_perc")
    base = recorded or (45.0 if percent else 0.45 if ratio else 0.0)
    value = base * (1 + 0.3 * wave)
    return min(value, 100.0) if percent else min(value, 1.0) if ratio else value


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
            value = _gauge(name, recorded, t, phase)
        out.append(f"{m['head']} {value:.6g}")
    return "\n".join(out) + "\n"


class Handler(BaseHTTPRequestHandler):
    """``GET …/metrics`` only."""

    protocol_version = "HTTP/1.1"
    text = ""
    started = time.monotonic()

    def do_GET(self) -> None:  # noqa: N802
        if not self.path.split("?")[0].endswith("/metrics"):
            body, status = b"GET /<replica>/metrics\n", 404
        else:
            body, status = render(self.text, time.monotonic() - self.started, self.path).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay a real exporter's output with moving values.")
    parser.add_argument("--kind", choices=sorted(FILES), required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    Handler.text = (REPLAYS / FILES[args.kind]).read_text()
    Handler.started = time.monotonic()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
