"""Passwords in target URLs are never shown: API responses, the scraper's log line and self-metrics
show ``user:***@``; the scraper still sends the credentials."""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of, redact_url
from tests.apptools import build_app, org

READ = "redact-read-key"
TRAINER_URL = "http://dcgmuser:t0psecret@127.0.0.1:9/metrics"
REPLICA_URL = "http://scrapeuser:s3cretpw@127.0.0.1:9/metrics"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (TRAINER_URL, "http://dcgmuser:***@127.0.0.1:9/metrics"),
        ("https://u:p@h.example/m?x=1", "https://u:***@h.example/m?x=1"),
        ("http://:pw@h/", "http://:***@h/"),
        ("http://user@h:9/m", "http://user@h:9/m"),
        ("http://h:9/m?next=a@b:c", "http://h:9/m?next=a@b:c"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url_hides_the_password_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    declarations = {
        "organizations": [org("acme", {READ: "WORKSPACE_EXPORT_METRICS"})],
        "models": [
            {
                "id": "m1",
                "organization": "acme",
                "deployments": [{"id": "d1", "replicas": [{"id": "r1", "targets": [REPLICA_URL]}]}],
            }
        ],
        "loops": [
            {
                "id": "t1",
                "organization": "acme",
                "nodes": [{"id": "n1", "role": "leader", "targets": [{"url": TRAINER_URL, "kind": "dcgm"}]}],
            }
        ],
    }
    with TestClient(build_app(tmp_path, declarations)) as c:
        yield c


def test_a_read_key_sees_no_password_in_trainer_or_replica_targets(client: TestClient) -> None:
    auth = {"Authorization": f"Api-Key {READ}"}
    loops = client.get("/v1/loops/deployments", headers=auth)
    assert loops.status_code == 200
    assert loops.json()["deployments"][0]["nodes"][0]["targets"] == [
        {"url": "http://dcgmuser:***@127.0.0.1:9/metrics", "kind": "dcgm"}
    ]
    one = client.get("/v1/loops/deployments/t1", headers=auth)
    assert (
        one.json()["deployment"]["nodes"][0]["targets"][0]["url"] == "http://dcgmuser:***@127.0.0.1:9/metrics"
    )
    replicas = client.get("/v1/models/m1/deployments/d1/replicas", headers=auth)
    assert replicas.status_code == 200
    assert replicas.json()["replicas"][0]["targets"] == ["http://scrapeuser:***@127.0.0.1:9/metrics"]
    for resp in (loops, one, replicas):
        assert "t0psecret" not in resp.text and "s3cretpw" not in resp.text


def _scrape(url: str, metrics: SelfMetrics):
    target = Target(url, labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1"}))

    async def go():
        async with httpx.AsyncClient() as c:
            return await Scraper(c, MemoryStore().append, metrics=metrics).scrape_once(target, 0)

    return anyio.run(go)


def test_the_scrape_failure_log_line_and_self_metrics_hide_the_password(caplog) -> None:
    metrics = SelfMetrics()
    with caplog.at_level(logging.WARNING, logger="servemetrics.ingest.scraper"):
        result = _scrape(REPLICA_URL, metrics)
    assert not result.up
    assert result.error is not None
    assert result.error.startswith(
        "scrape of http://scrapeuser:***@127.0.0.1:9/metrics (model m1 deployment d1 replica r1) failed: "
    )
    assert [r.getMessage() for r in caplog.records] == [result.error]
    exposed = generate_latest(metrics.registry).decode()
    assert 'target="http://scrapeuser:***@127.0.0.1:9/metrics"} 0.0' in exposed
    assert "s3cretpw" not in caplog.text + result.error + exposed


def test_the_scraper_still_sends_the_credentials() -> None:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        result = _scrape(f"http://scrapeuser:s3cretpw@127.0.0.1:{port}/metrics", SelfMetrics())
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["Basic " + base64.b64encode(b"scrapeuser:s3cretpw").decode()]
    assert result.error is not None and "s3cretpw" not in result.error
    assert f"for url 'http://scrapeuser:***@127.0.0.1:{port}/metrics'" in result.error
