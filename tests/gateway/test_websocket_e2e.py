"""WebSockets through the gateway on real processes (`servemetrics serve` in front of
examples/ws_replica.py, an echo replica): issue 16 part 4, "a WebSocket echo replica: N connections
open -> the gauge reads N; closed with codes 1000 / 1011 -> counted by code".

Model m1: deployment d1 (replica r1, serving ``production``), d2 (no replica) and d3 (replica r3, its own
echo process, serving ``counted``: only the counting test connects to it, so its series are that
test's alone). Counts are read both from the gateway's exposition (exact, at once) and through the
metrics API (after the service's scrapes: waited on).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.processes import (
    free_port,
    promoted,
    start,
    start_service,
    stop,
    wait_http,
    wait_until,
    write_service_config,
)

pytestmark = pytest.mark.e2e
KEY = "websocket-e2e-key"
AUTH = {"Authorization": f"Api-Key {KEY}"}
REQUESTS = "baseten_inference_requests_total"
GAUGE = "baseten_ongoing_websocket_connections"


@dataclass(frozen=True)
class Service:
    """The running service (``base`` http://…, ``ws`` ws://…), its port and r1's."""

    base: str
    ws: str
    port: int
    r1_port: int


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp: Path = tmp_path_factory.mktemp("websocket")
    r1, r3, sport = free_port(), free_port(), free_port()
    replicas = [
        start(["examples/ws_replica.py", "--port", str(port)], tmp / f"replica{port}.log")
        for port in (r1, r3)
    ]
    deployments = [
        {"id": "d1", "replicas": [{"id": "r1", "targets": [f"http://127.0.0.1:{r1}/metrics"]}]},
        {"id": "d2", "replicas": []},
        {"id": "d3", "replicas": [{"id": "r3", "targets": [f"http://127.0.0.1:{r3}/metrics"]}]},
    ]
    model = {
        "id": "m1",
        "name": "ws",
        "organization": "acme",
        "deployments": deployments,
        "environments": [promoted("production", "d1"), promoted("counted", "d3")],
    }
    write_service_config(
        tmp, sport, [{"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}], [model]
    )
    service = start_service(tmp)
    try:
        for port in (r1, r3):
            wait_http(f"http://127.0.0.1:{port}/health")
        wait_http(f"http://127.0.0.1:{sport}/healthz")
        httpx.patch(  # a connection holds one of d3's slots while open: room for the counting test's 4
            f"http://127.0.0.1:{sport}/v1/models/m1/deployments/d3/autoscaling_settings",
            headers=AUTH,
            json={"concurrency_target": 10},
        ).raise_for_status()
        yield Service(f"http://127.0.0.1:{sport}", f"ws://127.0.0.1:{sport}", sport, r1)
    finally:
        stop(service)
        for proc in replicas:
            stop(proc)


def _open(svc: Service, env: str = "production", query: str = "", **kw: object) -> ClientConnection:
    """A WebSocket through the gateway to ``env`` (``query``: the URL's query string). A replica is
    active after its first good health check; until then the upgrade waits in the deployment's queue."""
    url = f"{svc.ws}/v1/models/m1/environments/{env}/websocket" + (f"?{query}" if query else "")
    return connect(url, **{"additional_headers": AUTH, "open_timeout": 60, **kw})  # type: ignore[arg-type]


def _gateway_samples(svc: Service, name: str, deployment: str) -> dict[str, float]:
    """``status_code`` (or "" for a gauge) -> value of ``name``'s samples of ``deployment`` in the
    gateway's exposition."""
    text = httpx.get(f"{svc.base}/gateway/metrics", headers=AUTH, timeout=10).text
    return {
        s.labels.get("status_code", ""): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and s.labels["deployment_id"] == deployment
    }


def _api(svc: Service, deployment: str, metric: str, **params: object) -> dict[str, float | None]:
    """The metrics API's answer for ``metric`` of ``deployment``: label set (its one value, "" for the
    plain set) -> the value of the first value set."""
    body = httpx.get(
        f"{svc.base}/v1/models/m1/deployments/{deployment}/metrics",
        headers=AUTH,
        params={"metrics": [metric], **params},  # type: ignore[dict-item]
        timeout=30,
    ).json()
    if not body["metric_descriptors"]:
        return {}
    (descriptor,) = body["metric_descriptors"]
    keys = [next(iter(ls.values()), "") for ls in descriptor["label_sets"]]
    return dict(zip(keys, body["metric_values"][0]["values"][0], strict=True))


def _closed_by_replica(ws: ClientConnection) -> ConnectionClosed:
    """The close the client received (waiting for it); fails if a message came instead."""
    with pytest.raises(ConnectionClosed) as closed:
        got = ws.recv(timeout=30)
        pytest.fail(f"a message came instead of the close: {got!r}")
    return closed.value


def test_frames_are_relayed_byte_exactly_both_ways(svc):
    text = "héllo, wörld ✓ " * 100
    binary = bytes(range(256)) * 4096  # 1 MiB, every byte value
    with _open(svc, subprotocols=["echo.v1"], max_size=None) as ws:
        assert ws.subprotocol == "echo.v1"  # the replica's choice, passed on
        assert ws.response.headers["x-servemetrics-replica"] == "r1"
        assert ws.response.headers["x-servemetrics-deployment-id"] == "d1"
        ws.send(text)
        got_text = ws.recv(timeout=30)
        ws.send(binary)
        got_binary = ws.recv(timeout=30)
        ws.send(b"")
        got_empty = ws.recv(timeout=30)
    assert isinstance(got_text, str) and got_text == text
    assert isinstance(got_binary, bytes) and got_binary == binary
    assert got_empty == b""


def test_the_replica_gets_the_clients_headers_but_not_its_key(svc):
    with _open(svc, additional_headers={**AUTH, "X-Session": "s-42"}) as ws:
        ws.send("headers")
        seen = json.loads(ws.recv(timeout=30))
    assert seen["x-session"] == "s-42"
    assert "authorization" not in seen
    assert seen["host"] == f"127.0.0.1:{svc.r1_port}"  # the replica's own, not the gateway's


def test_n_open_connections_read_n_and_closes_count_by_code(svc):
    since = int(time.time() * 1000) - 1000
    with contextlib.ExitStack() as stack:
        conns = [stack.enter_context(_open(svc, "counted")) for _ in range(4)]
        for i, ws in enumerate(conns):  # each one relayed end to end before counting
            ws.send(f"ping {i}")
            assert ws.recv(timeout=30) == f"ping {i}"
        assert _gateway_samples(svc, GAUGE, "d3") == {"": 4.0}
        wait_until(lambda: _api(svc, "d3", GAUGE, mode="CURRENT") == {"": 4.0}, "the API's gauge to read 4")

        conns[0].close(1000)  # the client closes: its code goes to the replica and is counted
        conns[1].close(1011, "client failed")
        conns[2].send("close 1011 model failed")  # the replica closes: its code goes to the client
        conns[3].send("close 1000 done")
        by_replica = [_closed_by_replica(conns[2]).rcvd, _closed_by_replica(conns[3]).rcvd]
    assert [(c.code, c.reason) for c in by_replica if c] == [(1011, "model failed"), (1000, "done")]

    counted = {"1000": 2.0, "1011": 2.0}
    wait_until(lambda: _gateway_samples(svc, REQUESTS, "d3") == counted, "the closes counted by code")
    assert _gateway_samples(svc, GAUGE, "d3") == {"": 0.0}
    window = {"start_epoch_millis": since, "group_by": "status_code", "mode": "SUMMARY"}
    wait_until(
        lambda: _api(svc, "d3", REQUESTS, end_epoch_millis=int(time.time() * 1000), **window) == counted,
        "the API's counts by close code",
    )
    wait_until(lambda: _api(svc, "d3", GAUGE, mode="CURRENT") == {"": 0.0}, "the API's gauge to read 0")


def test_a_replica_dying_mid_connection_closes_the_client_with_1011_and_counts_it(svc):
    before = _gateway_samples(svc, REQUESTS, "d1").get("1011", 0.0)
    with _open(svc) as ws:
        ws.send("drop")  # the replica drops the TCP connection without a close frame
        closed = _closed_by_replica(ws)
    assert closed.rcvd is not None and closed.rcvd.code == 1011
    wait_until(
        lambda: _gateway_samples(svc, REQUESTS, "d1").get("1011", 0.0) == before + 1, "the 1011 counted"
    )


@pytest.mark.parametrize("status", [403, 500])
def test_a_replica_refusing_the_upgrade_has_its_answer_relayed_and_counted(svc, status):
    before = _gateway_samples(svc, REQUESTS, "d1").get(str(status), 0.0)
    with pytest.raises(InvalidStatus) as refused:
        _open(svc, query=f"refuse={status}")
    assert refused.value.response.status_code == status
    assert bytes(refused.value.response.body or b"") == b"refused by the replica\n"
    assert _gateway_samples(svc, REQUESTS, "d1")[str(status)] == before + 1


def test_no_replica_unknown_environment_and_a_missing_key_are_http_answers(svc):
    cases = [
        (
            f"{svc.ws}/v1/models/m1/deployment/d2/websocket",
            AUTH,
            503,
            "deployment 'd2' has no serving replica",
        ),
        (
            f"{svc.ws}/v1/models/m1/environments/staging/websocket",
            AUTH,
            404,
            "model 'm1' has no environment 'staging'",
        ),
        (f"{svc.ws}/v1/models/m1/environments/production/websocket", {}, 401, "missing API key"),
    ]
    for url, headers, status, error in cases:
        with pytest.raises(InvalidStatus) as refused:
            connect(url, additional_headers=headers, open_timeout=30)
        answer = refused.value.response
        assert (answer.status_code, error in json.loads(bytes(answer.body or b""))["error"]) == (status, True)
    assert _gateway_samples(svc, REQUESTS, "d2") == {"503": 1.0}  # metered like an HTTP 503


def test_the_model_may_come_from_the_host_header(svc):
    with socket.create_connection(("127.0.0.1", svc.port)) as sock:
        url = f"ws://model-m1.localhost:{svc.port}/environments/production/websocket"
        with connect(url, sock=sock, additional_headers=AUTH, open_timeout=60) as ws:
            ws.send(b"\x00host form\xff")
            assert ws.recv(timeout=30) == b"\x00host form\xff"
