"""Half-open connections (headers never finished) are closed within ``server.header_timeout``, against a
real `servemetrics serve` and raw sockets (issue 12 part 10)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from servemetrics.config import ConfigError, parse_config
from tests.reliability.helpers import service


def _closed_within(sock: socket.socket, deadline_s: float) -> float:
    """Seconds until the server closed ``sock`` (recv returns b""); AssertionError after ``deadline_s``."""
    started = time.monotonic()
    sock.settimeout(deadline_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {deadline_s} s") from None
    return time.monotonic() - started


def test_connections_that_never_finish_their_headers_are_closed(tmp_path):
    with service(tmp_path, server={"header_timeout": "1s", "keep_alive_timeout": "1s"}) as base:
        port = int(base.rsplit(":", 1)[1])
        silent = socket.create_connection(("127.0.0.1", port))
        partial = socket.create_connection(("127.0.0.1", port))
        partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: headers never end
        kept = socket.create_connection(("127.0.0.1", port))
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        kept.settimeout(10)
        assert kept.recv(4096).startswith(b"HTTP/1.1 200 OK")
        kept.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next request on it starts and stalls
        try:
            waited = [_closed_within(s, 10.0) for s in (silent, partial, kept)]
        finally:
            for s in (silent, partial, kept):
                s.close()
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
    assert all(w < 5.0 for w in waited), waited  # header_timeout 1 s; slack for a loaded machine


def test_the_server_section_is_checked():
    with pytest.raises(ConfigError) as bad:
        parse_config({"server": {"header_timeout": "50ms", "limit_concurrency": 0}})
    assert str(bad.value) == (
        "config: `server.header_timeout`: must be at least 100ms (got 0.05s); "
        "`server.limit_concurrency`: Input should be greater than or equal to 1"
    )
