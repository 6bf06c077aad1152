"""Exporters for ``test_hostile_targets``, in their own process (their bodies and threads are not the
scraper's): ``python -m tests.reliability.hostile_exporters`` serves one ``/metrics`` body per ``KINDS``
entry on a free port of 127.0.0.1, the bodies generated once at start, then prints ``ready`` and the
ports in ``KINDS`` order, and serves until its stdin closes.

- ``healthy``: ``HEALTHY_SERIES`` gauges (``HEALTHY_BYTES`` bytes).
- ``big``: a valid exposition of ``BIG_BYTES`` (50 MiB) bytes: ``BIG_LINES`` gauges, each line
  ``BIG_LINE_BYTES`` bytes long.
- ``many``: ``MANY_SERIES`` (100,000) gauges, about 4.5 MB.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GAUGE = "vllm:num_requests_running"
TYPE_LINE = f"# TYPE {GAUGE} gauge\n"
HEALTHY_SERIES = 5
MANY_SERIES = 100_000
BIG_LINE_BYTES = 100
BIG_LINES = 524_288
BIG_BYTES = BIG_LINES * BIG_LINE_BYTES + len(TYPE_LINE)
"""52,428,840 bytes: 50 MiB of sample lines and the ``# TYPE`` line."""
KINDS = ("healthy", "healthy", "healthy", "big", "many")


def healthy_body() -> bytes:
    """``HEALTHY_SERIES`` gauges ``{i="0"} 0`` … ``{i="4"} 4``."""
    return (TYPE_LINE + "".join(f'{GAUGE}{{i="{i}"}} {i}\n' for i in range(HEALTHY_SERIES))).encode()


HEALTHY_BYTES = len(healthy_body())


def big_body() -> bytes:
    """``BIG_LINES`` lines ``vllm:num_requests_running{i="<7 digits>",pad="xx…"} 1``, 100 bytes each."""
    pad = "x" * (BIG_LINE_BYTES - len(f'{GAUGE}{{i="0000000",pad=""}} 1\n'))
    return (TYPE_LINE + "".join(f'{GAUGE}{{i="{i:07d}",pad="{pad}"}} 1\n' for i in range(BIG_LINES))).encode()


def many_body() -> bytes:
    """``MANY_SERIES`` gauges ``{i="0"} 0`` … ``{i="99999"} 99999``."""
    return (TYPE_LINE + "".join(f'{GAUGE}{{i="{i}"}} {i}\n' for i in range(MANY_SERIES))).encode()


BODIES = {"healthy": healthy_body, "big": big_body, "many": many_body}


def serve(body: bytes) -> ThreadingHTTPServer:
    """A server of ``body`` on a free port of 127.0.0.1 (a scraper hanging up mid-body is no error)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    """Serve each of ``KINDS``' bodies, print ``ready PORT…`` and serve until stdin closes."""
    made = {kind: make() for kind, make in BODIES.items()}
    assert len(made["big"]) == BIG_BYTES and len(made["healthy"]) == HEALTHY_BYTES
    servers = [serve(made[kind]) for kind in KINDS]
    print("ready", *(s.server_address[1] for s in servers), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
