"""Issue 12 parts 6 and 7 on a real ``servemetrics serve``: the key is checked before a body is read,
every body is capped before it is read (``Content-Length`` first, then the bytes counted as they
stream), and a remote_write body's declared decompressed size is checked before decompressing.

The service runs with small ``limits`` (64 KiB API bodies, 128 KiB inference bodies, 64 KiB
remote_write, 256 KiB import) in front of a replica (a real HTTP server of this test) that records
what reaches it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.apptools import auth, org
from tests.processes import free_port, promoted, start_service, stop, wait_http, write_service_config
from tests.security.conftest import Recorder

pytestmark = pytest.mark.e2e
MANAGE = "bodies-manage"
KIB = 1024
LIMITS = {
    "max_body_bytes": "64KiB",
    "inference_body_bytes": "128KiB",
    "remote_write_body_bytes": "64KiB",
    "import_body_bytes": "256KiB",
}


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[tuple[str, Recorder]]:
    tmp = tmp_path_factory.mktemp("bodies")
    replica = Recorder("127.0.0.1", free_port()).start()
    replica.release.set()
    sport = free_port()
    deployment = {"id": "d1", "replicas": [{"id": "r1", "targets": [f"{replica.url}/metrics"]}]}
    model = {"id": "m1", "organization": "acme", "deployments": [deployment]}
    write_service_config(
        tmp,
        sport,
        [org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL"})],
        [{**model, "environments": [promoted("production", "d1")]}],
        limits=LIMITS,
    )
    service = start_service(tmp)
    try:
        base = f"http://127.0.0.1:{sport}"
        wait_http(f"{base}/healthz")
        yield base, replica
    finally:
        stop(service)
        replica.stop()


def _raw(base: str, head: str) -> tuple[int, dict[str, str]]:
    """Send only the request head ``head`` (no body) and read the answer: (status, JSON body). The
    service must answer without waiting for the body it was promised (10 s socket timeout)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1])


def test_a_200_mb_body_without_a_key_is_refused_before_it_is_sent(svc):
    base, _ = svc
    head = f"POST /v1/models HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: {200 << 20}\n"
    status, body = _raw(base, head)
    assert status == 413
    assert body == {
        "error": f"the request body is {200 << 20} bytes; this path takes at most {64 * KIB} bytes "
        "(limits.max_body_bytes in the service's config file)"
    }


def test_the_key_is_checked_before_the_body_is_read(svc):
    base, _ = svc
    head = f"POST /v1/models HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: {60 * KIB}\n"
    status, body = _raw(base, head)  # the 60 KiB are never sent: a 401 must not wait for them
    assert status == 401 and body["error"].startswith("missing API key")


def test_no_key_and_a_malformed_body_is_a_401_not_a_400(svc):
    base, _ = svc
    resp = httpx.post(f"{base}/v1/models", content=b"{" * 1000, headers={"Content-Type": "application/json"})
    assert resp.status_code == 401 and resp.json()["error"].startswith("missing API key")
    bad_key = {**auth("not-a-key"), "Content-Type": "application/json"}
    resp = httpx.post(f"{base}/v1/models", content=b"{" * 1000, headers=bad_key)
    assert resp.status_code == 401 and resp.json()["error"].startswith("invalid API key")


def _chunks(total: int, piece: int = 16 * KIB) -> Iterator[bytes]:
    """``total`` bytes in ``piece``-byte chunks (httpx sends a generator chunked, without a length)."""
    yield b'{"name": "'
    for _ in range(total // piece):
        yield b"x" * piece
    yield b'"}'


def test_a_chunked_body_over_the_limit_is_a_413(svc):
    base, _ = svc
    resp = httpx.post(
        f"{base}/v1/models",
        content=_chunks(256 * KIB),
        headers={**auth(MANAGE), "Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 413, resp.text
    assert resp.json() == {
        "error": f"the request body is more than {64 * KIB} bytes; this path takes at most {64 * KIB} bytes "
        "(limits.max_body_bytes in the service's config file)"
    }
    ok = httpx.post(f"{base}/v1/models", json={"id": "small", "name": "x"}, headers=auth(MANAGE))
    assert ok.status_code == 201, ok.text


def test_an_inference_body_over_its_limit_never_reaches_the_replica(svc):
    base, replica = svc
    predict = f"{base}/v1/models/m1/environments/production/predict"
    small = httpx.post(predict, content=b"x" * (100 * KIB), headers=auth(MANAGE), timeout=30)
    assert small.status_code == 200, small.text  # over max_body_bytes, under inference_body_bytes
    relayed = sum(1 for _, path in replica.requests if path.endswith("/predict"))  # not the scrapes
    for content in (b"x" * (200 * KIB), _chunks(200 * KIB)):
        resp = httpx.post(predict, content=content, headers=auth(MANAGE), timeout=30)
        assert resp.status_code == 413, resp.text
        assert "at most 131072 bytes (limits.inference_body_bytes" in resp.json()["error"]
    assert sum(1 for _, path in replica.requests if path.endswith("/predict")) == relayed


def test_a_snappy_body_declaring_4_gib_is_a_413_before_decompressing(svc):
    base, _ = svc
    bomb = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, 0x00])  # varint 4294967295, then 2 bytes
    headers = {**auth(MANAGE), "Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"}
    resp = httpx.post(f"{base}/api/v1/write", content=bomb, headers=headers)
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"].startswith(
        f"the body declares 4294967295 bytes decompressed; at most {64 * KIB} are allowed "
        "(limits.remote_write_body_bytes in the service's config file)"
    )
    too_long = httpx.post(f"{base}/api/v1/write", content=b"\x00" * (65 * KIB), headers=headers)
    assert too_long.status_code == 413 and "limits.remote_write_body_bytes" in too_long.json()["error"]


def test_an_import_over_its_limit_is_a_413(svc):
    base, _ = svc
    params = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
    lines = (b"# TYPE x gauge\n", *(b"x 1 %d\n" % i for i in range(60_000)), b"# EOF\n")  # about 600 KiB
    resp = httpx.post(
        f"{base}/v1/import", params=params, content=iter(lines), headers=auth(MANAGE), timeout=30
    )
    assert resp.status_code == 413, resp.text
    assert "at most 262144 bytes (limits.import_body_bytes" in resp.json()["error"]
