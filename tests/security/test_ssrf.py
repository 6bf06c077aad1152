"""Issue 12 part 1 (SSRF): a tenant's replica targets and webhooks cannot lead the service to its own
loopback services, the metadata address or (webhooks) private ranges; the operator allows what the
cluster needs with ``network.targets_allow`` / ``network.webhooks_allow``.

Registration is refused with a 400 naming the setting; a DNS answer that changes after registration is
refused at connect time (the gateway's 502, the scrape's ``up`` 0, the webhook's failed delivery). In
every case the internal service (a real HTTP server on 127.0.0.1) gets no request at all.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from servemetrics.api.app import create_app
from servemetrics.gateway import GatewayOptions
from servemetrics.gateway.queued import QueuedOptions
from servemetrics.store.memory import MemoryStore
from tests.apptools import app_config, auth, org
from tests.processes import promoted, wait_until
from tests.security.conftest import Dns, Pair, Recorder

MANAGE = "sec-manage"
REPLICAS = "/v1/models/m1/deployments/d1/replicas"


def declarations(**more: Any) -> dict[str, Any]:
    """acme with a managing key; model m1, deployment d1 (no replicas), production promoted to d1."""
    return {
        "organizations": [org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL"})],
        "models": [
            {
                "id": "m1",
                "organization": "acme",
                "deployments": [{"id": "d1"}],
                "environments": [promoted("production", "d1")],
            }
        ],
        **more,
    }


ATTACKS = [
    "http://127.0.0.1:{port}/metrics",
    "http://localhost:{port}/metrics",
    "http://0x7f000001:{port}/metrics",
    "http://2130706433:{port}/metrics",
    "http://0177.0.0.1:{port}/metrics",
    "http://[::ffff:127.0.0.1]:{port}/metrics",
    "http://[::1]:{port}/metrics",
    "http://0.0.0.0:{port}/metrics",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
]


@pytest.mark.parametrize("template", ATTACKS)
def test_registering_an_internal_target_is_a_400_naming_the_setting(serve, internal: Recorder, template):
    client = serve(declarations())
    url = template.format(port=internal.port)
    resp = client.post(REPLICAS, json={"id": "evil", "targets": [url]}, headers=auth(MANAGE))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error.startswith(f"target {url} is refused by the network policy: ")
    assert "network.targets_allow in the config file" in error
    assert client.get(REPLICAS, headers=auth(MANAGE)).json()["replicas"] == []
    assert internal.requests == []


def test_the_operator_allows_loopback_targets_with_targets_allow(serve, internal: Recorder):
    client = serve(declarations(network={"targets_allow": ["127.0.0.1"]}))
    url = f"http://127.0.0.1:{internal.port}/metrics"
    resp = client.post(REPLICAS, json={"id": "r1", "targets": [url]}, headers=auth(MANAGE))
    assert (resp.status_code, resp.json()["targets"]) == (201, [url])


def test_private_targets_are_allowed_by_default_but_not_private_webhooks(serve):
    client = serve(declarations())
    ok = client.post(
        REPLICAS, json={"id": "r1", "targets": ["http://10.0.0.5:8000/metrics"]}, headers=auth(MANAGE)
    )
    assert ok.status_code == 201, ok.text
    for hook, kind in [
        ("http://10.0.0.5/hook", "a private address (RFC 1918)"),
        ("http://100.64.1.1/hook", "a shared address (CGNAT, RFC 6598)"),
        ("http://[fd12::1]/hook", "a unique local IPv6 address (ULA)"),
        ("http://127.0.0.1:9/hook", "a loopback address"),
        ("http://169.254.169.254/hook", "a link-local address"),
    ]:
        resp = client.post(
            "/v1/models/m1/environments/production/async_predict",
            json={"model_input": {}, "webhook_endpoint": hook},
            headers=auth(MANAGE),
        )
        assert resp.status_code == 400, (hook, resp.text)
        error = resp.json()["error"]
        assert error.startswith(f"webhook_endpoint {hook} is refused by the network policy: "), error
        assert kind in error and "network.webhooks_allow in the config file" in error


def _app(tmp_path: Path, decl: dict[str, Any], **kwargs: Any) -> TestClient:
    """The app over ``decl`` with the gateway's health checks every 60 s (the first at once), so a
    replica found healthy stays active through the test."""
    config = app_config(tmp_path, decl)
    options = GatewayOptions(health_interval_s=60.0)
    kwargs.setdefault("scrape", False)
    return TestClient(create_app(config, store=MemoryStore(), gateway_options=options, **kwargs))


def test_a_dns_change_after_registration_is_a_502_at_the_gateway(tmp_path, pair: Pair, dns: Dns):
    dns["replica.test"] = "127.0.0.2"  # an address the operator allows
    decl = declarations(network={"targets_allow": ["127.0.0.2"]})
    with _app(tmp_path, decl) as client:
        url = f"http://replica.test:{pair.port}/metrics"
        created = client.post(REPLICAS, json={"id": "r1", "targets": [url]}, headers=auth(MANAGE))
        assert created.status_code == 201, created.text
        sync = "/v1/models/m1/environments/production/sync/admin/secrets"

        def relayed() -> bool:
            return client.get(sync, headers=auth(MANAGE)).status_code == 200

        wait_until(relayed, "the replica to be active and relayed to", 30)
        assert ("GET", "/admin/secrets") in pair.replica.requests
        dns["replica.test"] = "127.0.0.1"  # now the internal service's address
        resp = client.get(sync, headers=auth(MANAGE))
        assert resp.status_code == 502, resp.text
        error = resp.json()["error"]
        assert error.startswith("replica 'r1' of 'd1' is not reachable: replica.test resolves to 127.0.0.1, ")
        assert "a loopback address" in error and "network.targets_allow" in error
    assert pair.internal.requests == []


def test_a_dns_change_fails_the_scrape_with_up_0_and_a_reason(tmp_path, pair: Pair, dns: Dns, caplog):
    dns["replica.test"] = "127.0.0.2"
    decl = declarations(network={"targets_allow": ["127.0.0.2"]}, scrape_interval="1s", scrape_timeout="1s")
    url = f"http://replica.test:{pair.port}/metrics"
    with _app(tmp_path, decl) as client:  # registered while it resolves to an allowed address
        created = client.post(REPLICAS, json={"id": "r1", "targets": [url]}, headers=auth(MANAGE))
        assert created.status_code == 201, created.text
    dns["replica.test"] = "127.0.0.1"
    caplog.set_level(logging.WARNING, "servemetrics.ingest.scraper")
    with _app(tmp_path, decl, scrape=True) as client:  # the scraper reads the targets at start
        own = client.app.state.service.metrics.registry  # per target: tenant labels, read in-process
        wait_until(lambda: _up(generate_latest(own).decode(), url) is not None, "the first scrape", 30)
        assert _up(generate_latest(own).decode(), url) == 0.0
    reasons = [r.getMessage() for r in caplog.records if url in r.getMessage()]
    assert reasons and "refused by the network policy: replica.test resolves to 127.0.0.1" in reasons[0]
    assert pair.internal.requests == []
    assert ("GET", "/metrics") not in pair.replica.requests  # (its /health was checked before the change)


def _up(exposition: str, url: str) -> float | None:
    """``servemetrics_target_up`` of ``url`` in the service's own metrics, None before its first scrape."""
    for line in exposition.splitlines():
        if line.startswith("servemetrics_target_up{") and f'target="{url}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_dns_change_fails_the_webhook_delivery(tmp_path, pair: Pair, dns: Dns):
    dns["hook.test"] = "127.0.0.2"
    replica = pair.replica  # declared in the config file: trusted, and its /predict waits for release
    deployment = {"id": "d1", "replicas": [{"id": "r1", "targets": [f"{replica.url}/metrics"]}]}
    decl = declarations(network={"webhooks_allow": ["127.0.0.2"]})
    decl["models"][0]["deployments"] = [deployment]
    queued = QueuedOptions(webhook_attempts=1)
    with _app(tmp_path, decl, queued_options=queued) as client:
        resp = client.post(
            "/v1/models/m1/environments/production/async_predict",
            json={"model_input": {"q": 1}, "webhook_endpoint": f"http://hook.test:{pair.port}/hook"},
            headers=auth(MANAGE),
        )
        assert resp.status_code == 201, resp.text
        request_id = resp.json()["request_id"]
        dns["hook.test"] = "127.0.0.1"  # before the request finishes and its webhook is sent
        replica.release.set()
        status = f"/v1/models/m1/async_requests/{request_id}"
        wait_until(
            lambda: client.get(status, headers=auth(MANAGE)).json()["webhook"]["status"] == "FAILED",
            "the delivery",
        )
        body = client.get(status, headers=auth(MANAGE)).json()
    assert body["status"] == "SUCCEEDED" and body["webhook"]["attempts"] == 1
    error = body["webhook"]["last_error"]
    assert error.startswith("the webhook is refused by the network policy: hook.test resolves to 127.0.0.1, ")
    assert "network.webhooks_allow" in error
    assert pair.internal.requests == []
    assert ("POST", "/hook") not in replica.requests


def test_the_service_own_listen_address_stays_refused_when_loopback_is_allowed(serve):
    client = serve(declarations(network={"targets_allow": ["127.0.0.0/8"]}))  # listen: 127.0.0.1:8321
    url = "http://127.0.0.1:8321/gateway/metrics"
    resp = client.post(REPLICAS, json={"id": "loop", "targets": [url]}, headers=auth(MANAGE))
    assert (resp.status_code, resp.json()) == (
        400,
        {
            "error": f"target {url} is refused by the network policy: 127.0.0.1 port 8321 is this "
            "service's own listen address; a replica or webhook may not point at the service itself"
        },
    )
