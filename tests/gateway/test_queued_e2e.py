"""Async requests on real processes: `servemetrics serve` in front of examples/replica.py and of a
local HTTP server in this test that is both a webhook receiver and a programmable fake replica.

Model m1 (acme): ``production`` -> a1 (one replica, 5 tokens 400 ms apart: about 1.6 s a request),
``staging`` -> a2 (one replica, unhealthy from the start: nothing runs until it heals), ``fake`` -> a3
(the test's server: its ``/predict`` answers ``Receiver.predict_status`` once ``Receiver.release`` is
set). m2 belongs to another organization.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.apptools import auth as _auth
from tests.gateway.test_gateway_e2e import gauge as _gauge
from tests.processes import (
    free_port,
    promoted,
    replicas_deployment,
    start_replicas,
    start_service,
    stop,
    theirs,
    two_organizations,
    wait_http,
    write_service_config,
)

pytestmark = pytest.mark.e2e
MANAGE, INVOKE, OTHER = "as-manage", "as-invoke-m1", "as-other-org"


def gauge(base: str, name: str) -> dict[str, float]:
    """deployment id -> value of a gateway gauge, as both organizations' keys read them."""
    return _gauge(base, name, (MANAGE, OTHER))


class Receiver:
    """Webhook receiver and fake replica, served by a ``ThreadingHTTPServer`` in this process."""

    def __init__(self) -> None:
        self.hooks: list[tuple[str, dict[str, Any]]] = []
        self.plans: dict[str, list[int]] = {}
        self.predict_status = 200
        self.server_timing: str | None = None  # a Server-Timing header on /predict answers
        self.predicts: list[Any] = []
        self.release = threading.Event()
        self.release.set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                if self.path == "/predict" and receiver.server_timing is not None:
                    self.send_header("Server-Timing", receiver.server_timing)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/metrics"):
                    self._reply(200, b"", "text/plain")
                else:
                    self._reply(200, b'{"status": "ok"}')

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                if self.path == "/predict":
                    receiver.release.wait(60)
                    with receiver.lock:
                        receiver.predicts.append(body)
                        n = len(receiver.predicts)
                    self._reply(receiver.predict_status, json.dumps({"echo": body, "n": n}).encode())
                    return
                with receiver.lock:
                    receiver.hooks.append((self.path, body))
                    plan = receiver.plans.get(self.path) or []
                    status = plan.pop(0) if plan else 200
                self._reply(status, b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hooks_to(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body in self.hooks if p == path]


@dataclass
class Svc:
    base: str
    tmp: Path
    replicas: list[str]
    recv: Receiver
    restart: Callable[[], None] = field(default=lambda: None)


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[Svc]:
    tmp = tmp_path_factory.mktemp("async")
    recv = Receiver()
    ports, procs = start_replicas(tmp, 2, token_ms=400)
    replicas = [f"http://127.0.0.1:{p}" for p in ports]
    for r in replicas:
        wait_http(f"{r}/health")
    httpx.post(f"{replicas[1]}/health", params={"healthy": 0}).raise_for_status()  # a2 never becomes active
    sport = free_port()
    organizations = two_organizations(MANAGE, INVOKE, OTHER)
    models = [
        {
            "id": "m1",
            "name": "asy",
            "organization": "acme",
            "deployments": [
                replicas_deployment("a1", [f"{replicas[0]}/metrics"]),
                replicas_deployment("a2", [f"{replicas[1]}/metrics"]),
                replicas_deployment("a3", [f"{recv.url}/metrics"]),
            ],
            "environments": [promoted("production", "a1"), promoted("staging", "a2"), promoted("fake", "a3")],
        },
        theirs(
            replicas_deployment("x1", [f"{recv.url}/metrics?x1"]), environments=[promoted("production", "x1")]
        ),
    ]
    # the test's webhook receiver is on loopback, which webhooks may not reach unless allowed
    write_service_config(tmp, sport, organizations, models, network={"webhooks_allow": ["127.0.0.1"]})
    base = f"http://127.0.0.1:{sport}"
    holder: list[Any] = []

    def up() -> None:
        holder.append(start_service(tmp))
        wait_http(f"{base}/healthz")

    def restart() -> None:
        stop(holder.pop())
        up()

    up()
    try:
        deadline = time.monotonic() + 20
        while gauge(base, "baseten_replicas_active") != {"a1": 1, "a2": 0, "a3": 1, "x1": 1}:
            assert time.monotonic() < deadline, gauge(base, "baseten_replicas_active")
            time.sleep(0.1)
        yield Svc(base, tmp, replicas, recv, restart)
    finally:
        for p in holder:
            stop(p)
        for p in procs:
            stop(p)
        recv.server.shutdown()
        recv.server.server_close()


def submit(base: str, env: str, body: dict[str, Any], key: str = INVOKE, model: str = "m1") -> httpx.Response:
    return httpx.post(
        f"{base}/v1/models/{model}/environments/{env}/async_predict",
        headers=_auth(key),
        json=body,
        timeout=10,
    )


def status(base: str, request_id: str, key: str = INVOKE, model: str = "m1") -> httpx.Response:
    return httpx.get(f"{base}/v1/models/{model}/async_requests/{request_id}", headers=_auth(key), timeout=10)


def wait_for(
    base: str, request_id: str, done: Callable[[dict[str, Any]], bool], deadline_s: float = 20
) -> dict[str, Any]:
    end = time.monotonic() + deadline_s
    while True:
        body = status(base, request_id).json()
        if done(body):
            return body
        assert time.monotonic() < end, body
        time.sleep(0.05)


def finished(body: dict[str, Any]) -> bool:
    return body["status"] in ("SUCCEEDED", "FAILED", "EXPIRED")


def delivered(body: dict[str, Any]) -> bool:
    return body["webhook"]["status"] in ("DELIVERED", "FAILED")


def ms(iso_time: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(iso_time.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_webhook_failing_twice_is_delivered_once_on_the_third_try(svc):
    base, recv = svc.base, svc.recv
    since = int(time.time() * 1000) - 60_000
    before = _webhooks(base, since)
    recv.plans["/hook/retry"] = [500, 503]
    r = submit(
        base, "production", {"model_input": {"prompt": "hi"}, "webhook_endpoint": f"{recv.url}/hook/retry"}
    )
    assert r.status_code == 201 and set(r.json()) == {"request_id"}
    rid = r.json()["request_id"]
    body = wait_for(base, rid, delivered)
    assert body["status"] == "SUCCEEDED" and body["attempts"] == 1 and body["deployment_id"] == "a1"
    assert body["webhook"] == {
        "status": "DELIVERED",
        "attempts": 3,
        "last_error": "the webhook answered HTTP 503: {}",
    }
    hooks = recv.hooks_to("/hook/retry")
    assert len(hooks) == 3 and hooks[0] == hooks[1] == hooks[2]
    assert hooks[0] == {
        "request_id": rid,
        "model_id": "m1",
        "deployment_id": "a1",
        "environment": "production",
        "type": "async_request_completed",
        "time": body["finished_at"],
        "data": "".join(f"p0-tok{i} (in 16 B)\n" for i in range(5)),  # {"prompt": "hi"} is 16 bytes
        "errors": [],
    }
    want = [before[0] + 1, before[1], before[2] + 2]
    deadline = time.monotonic() + 15
    while _webhooks(base, since) != want and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _webhooks(base, since) == want  # 2xx, 4xx, 5xx through the metrics API


def _webhooks(base: str, since: int) -> list[float]:
    body = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=_auth(MANAGE),
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": since,
            "end_epoch_millis": int(time.time() * 1000),
            "metrics": ["baseten_async_webhook_requests_total"],
        },
    ).json()
    by = {
        d["name"]: v
        for d, v in zip(body["metric_descriptors"], body["metric_values"][0]["values"], strict=True)
    }
    return [v or 0 for v in by.get("baseten_async_webhook_requests_total", [0, 0, 0])]


def _inference_sum_count(base: str, dep: str) -> tuple[float, float]:
    """``baseten_inference_time_seconds`` ``_sum`` and ``_count`` of ``dep``'s async executions."""
    text = httpx.get(f"{base}/gateway/metrics", headers=_auth(MANAGE)).text
    name = "baseten_inference_time_seconds"
    samples = [
        s
        for f in text_string_to_metric_families(text)
        if f.name == name
        for s in f.samples
        if s.labels["deployment_id"] == dep and s.labels["is_async"] == "true"
    ]
    total = sum(s.value for s in samples if s.name == f"{name}_sum")
    return total, sum(s.value for s in samples if s.name == f"{name}_count")


def test_an_async_execution_meters_the_replicas_server_timing(svc):
    base, recv = svc.base, svc.recv
    before = _inference_sum_count(base, "a3")
    recv.server_timing = 'pre;dur=3, inference;dur=250.5;desc="run"'
    try:
        rid = submit(base, "fake", {"model_input": {"q": "timed"}}).json()["request_id"]
        assert wait_for(base, rid, finished)["status"] == "SUCCEEDED"
        recv.server_timing = "inference;dur=bad"  # malformed: the request succeeds, nothing observed
        rid = submit(base, "fake", {"model_input": {"q": "bad"}}).json()["request_id"]
        assert wait_for(base, rid, finished)["status"] == "SUCCEEDED"
    finally:
        recv.server_timing = None
    total, count = _inference_sum_count(base, "a3")
    assert count == before[1] + 1 and total == pytest.approx(before[0] + 0.2505, abs=1e-9)


def test_status_transitions_in_order_and_the_queue_gauges(svc):
    base = svc.base
    ids = [submit(base, "production", {"model_input": i}).json()["request_id"] for i in range(3)]
    first = wait_for(base, ids[0], lambda b: b["status"] == "IN_PROGRESS")
    assert first["deployment_id"] == "a1" and first["attempts"] == 1 and first["started_at"] is not None
    queued = status(base, ids[2]).json()
    assert queued["status"] == "QUEUED" and queued["deployment_id"] is None
    assert (queued["started_at"], queued["finished_at"], queued["attempts"]) == (None, None, 0)
    assert queued["webhook"] == {"status": None, "attempts": 0, "last_error": None}
    # one async in flight, two queued: the async queue shows them; concurrency does not count them
    deadline = time.monotonic() + 1
    while gauge(base, "baseten_async_queue_size")["a1"] != 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gauge(base, "baseten_async_queue_size")["a1"] == 2
    assert gauge(base, "baseten_concurrent_requests")["a1"] == 0
    with ThreadPoolExecutor(1) as pool:  # a synchronous request waits behind the async one ...
        sync = pool.submit(
            httpx.post,
            f"{base}/v1/models/m1/environments/production/predict",
            headers=_auth(INVOKE),
            params={"tokens": 1},
            timeout=30,
        )
        deadline = time.monotonic() + 5
        while gauge(base, "baseten_concurrent_requests")["a1"] != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (
            gauge(base, "baseten_concurrent_requests")["a1"] == 1
        )  # ... counted alone: queued, not the async
        assert sync.result().status_code == 200
    bodies = [wait_for(base, i, finished) for i in ids]
    assert [b["status"] for b in bodies] == ["SUCCEEDED"] * 3
    for a, b in zip(bodies, bodies[1:], strict=False):
        assert ms(a["finished_at"]) <= ms(b["started_at"])  # one at a time, in arrival order
    assert ms(bodies[0]["created_at"]) <= ms(bodies[0]["started_at"]) <= ms(bodies[0]["finished_at"])
    assert gauge(base, "baseten_async_queue_size")["a1"] == 0


def test_a_model_error_fails_the_request_and_the_webhook_says_why(svc):
    base, recv = svc.base, svc.recv
    recv.predict_status = 500
    try:
        rid = submit(
            base, "fake", {"model_input": {"q": 1}, "webhook_endpoint": f"{recv.url}/hook/err"}
        ).json()["request_id"]
        body = wait_for(base, rid, delivered)
    finally:
        recv.predict_status = 200
    assert (body["status"], body["deployment_id"], body["webhook"]["status"]) == ("FAILED", "a3", "DELIVERED")
    [hook] = recv.hooks_to("/hook/err")
    assert hook["data"]["echo"] == {"q": 1}
    assert hook["errors"] == [{"code": "MODEL_PREDICT_ERROR", "message": "the replica answered HTTP 500"}]


def test_queued_requests_expire_with_a_webhook_error(svc):
    base, recv = svc.base, svc.recv
    body = {"model_input": 1, "webhook_endpoint": f"{recv.url}/hook/exp", "max_time_in_queue_seconds": 1}
    rid = submit(base, "staging", body).json()["request_id"]
    assert status(base, rid).json()["status"] == "QUEUED"
    got = wait_for(base, rid, delivered, 10)
    assert got["status"] == "EXPIRED" and got["deployment_id"] is None and got["started_at"] is None
    assert 1000 <= ms(got["finished_at"]) - ms(got["created_at"]) < 2000
    [hook] = recv.hooks_to("/hook/exp")
    assert hook["data"] is None and hook["deployment_id"] is None and hook["time"] == got["finished_at"]
    assert [e["code"] for e in hook["errors"]] == ["REQUEST_EXPIRED"]


def test_cancel_a_queued_request_and_not_a_finished_one(svc):
    base = svc.base
    url = f"{base}/v1/models/m1/async_requests"
    rid = submit(base, "staging", {"model_input": 1}).json()["request_id"]
    r = httpx.delete(f"{url}/{rid}", headers=_auth(INVOKE))
    assert r.status_code == 200 and r.json() == {"request_id": rid, "canceled": True}
    assert status(base, rid).status_code == 404
    assert httpx.delete(f"{url}/{rid}", headers=_auth(INVOKE)).status_code == 404
    done = submit(base, "fake", {"model_input": 1}).json()["request_id"]
    wait_for(base, done, finished)
    r = httpx.delete(f"{url}/{done}", headers=_auth(INVOKE))
    assert r.status_code == 409 and "SUCCEEDED" in r.json()["error"]


def test_tenancy_auth_bodies_and_the_host_form(svc):
    base = svc.base
    rid = submit(base, "staging", {"model_input": 1}).json()["request_id"]
    try:
        assert status(base, rid, key=OTHER).status_code == 404  # m1 is not theirs
        assert status(base, rid, key=OTHER, model="m2").status_code == 404  # nor is the request
        assert status(base, "nope").status_code == 404
        assert status(base, rid, key="bad").status_code == 401
        assert submit(base, "production", {"model_input": 1}, key=OTHER).status_code == 404
        assert submit(base, "nope", {"model_input": 1}).status_code == 404
        bad = submit(base, "production", {"input": 1})
        assert bad.status_code == 400 and "unknown field(s) input" in bad.json()["error"]
        r = httpx.post(
            f"{base}/environments/fake/async_predict",
            headers={**_auth(INVOKE), "Host": "model-m1.example.com"},
            json={"model_input": {"via": "host"}},
        )
        assert r.status_code == 201
        assert wait_for(base, r.json()["request_id"], finished)["deployment_id"] == "a3"
    finally:
        httpx.delete(f"{base}/v1/models/m1/async_requests/{rid}", headers=_auth(INVOKE))


def test_a_restart_keeps_queued_requests_and_requeues_the_running_one(svc):
    base, recv = svc.base, svc.recv
    queued = [submit(base, "staging", {"model_input": i}).json()["request_id"] for i in range(2)]
    recv.release.clear()  # a3's replica holds its answers
    try:
        running = submit(base, "fake", {"model_input": "slow"}).json()["request_id"]
        wait_for(base, running, lambda b: b["status"] == "IN_PROGRESS")
        assert gauge(base, "baseten_async_queue_size")["a2"] == 2
        svc.restart()
        assert [status(base, i).json()["status"] for i in queued] == ["QUEUED", "QUEUED"]
        # back to QUEUED at start, then sent again (to the replica that still holds its answer)
        again = wait_for(base, running, lambda b: b["attempts"] == 2)
        assert again["status"] == "IN_PROGRESS"
    finally:
        recv.release.set()
    assert wait_for(base, running, finished)["status"] == "SUCCEEDED"
    httpx.post(f"{svc.replicas[1]}/health", params={"healthy": 1}).raise_for_status()  # a2 heals
    bodies = [wait_for(base, i, finished, 20) for i in queued]
    assert [(b["status"], b["deployment_id"], b["attempts"]) for b in bodies] == [("SUCCEEDED", "a2", 1)] * 2
    assert gauge(base, "baseten_async_queue_size")["a2"] == 0
