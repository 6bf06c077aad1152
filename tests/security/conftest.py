"""Fixtures of the security tests: the "internal service" an attacker tries to reach (a real loopback
HTTP server that records every request), a replica beside it on another loopback address, and a
resolver whose answers a test changes (``dns``: a DNS answer that changes after registration).

The ``serve`` fixture of ``tests/api/conftest.py`` (the app in a ``TestClient``) and the ``exporter`` of
``tests/scrape/test_scraper.py`` (a real ``/metrics`` server, for hostile targets) are used here too.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.api.conftest import serve  # noqa: F401  (the fixture)
from tests.scrape.test_scraper import exporter  # noqa: F401  (the fixture: a real /metrics server)


@dataclass
class Recorder:
    """A real HTTP/1.0 server on ``host``:``port`` (each answer closes its connection) that records every
    request as ``(method, path)``; ``/predict`` waits for ``release``."""

    host: str
    port: int
    requests: list[tuple[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Recorder:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(size)
                recorder.requests.append((self.command, self.path))
                if self.path == "/predict":
                    recorder.release.wait(30)
                body = b'{"secret": "internal"}' if recorder.host == "127.0.0.1" else b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _answer  # noqa: N815

        self.server = ThreadingHTTPServer((self.host, self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


def _free_port_on_both() -> int:
    """A port free on 127.0.0.1 and on 127.0.0.2 a moment ago."""
    while True:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.2", port))
            except OSError:
                continue
            return port


@dataclass
class Pair:
    """``internal`` on 127.0.0.1 (what the attacker wants) and ``replica`` on 127.0.0.2, same port."""

    internal: Recorder
    replica: Recorder
    port: int


@pytest.fixture
def pair() -> Iterator[Pair]:
    port = _free_port_on_both()
    internal, replica = Recorder("127.0.0.1", port).start(), Recorder("127.0.0.2", port).start()
    try:
        yield Pair(internal, replica, port)
    finally:
        internal.stop()
        replica.stop()


@pytest.fixture
def internal() -> Iterator[Recorder]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recorder = Recorder("127.0.0.1", port).start()
    try:
        yield recorder
    finally:
        recorder.stop()


Dns = dict[str, str]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    """Names under ``.test`` resolve to the address this dict holds now (change it: the DNS answer
    changed); every other name as the system resolves it. Patches ``socket.getaddrinfo``, which the
    event loop's ``getaddrinfo`` calls too."""
    answers: Dns = {}
    real: Callable[..., Any] = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str) and name.endswith(".test"):
            if name not in answers:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(answers[name], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers
