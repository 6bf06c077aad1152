"""``GET /v1/service_discovery/targets``: Prometheus HTTP SD JSON of the caller's organization."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.service import scrape_targets
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import at

KEY, SCOPED_KEY, INVOKE_KEY, OTHER_KEY = "sm-sd-key", "sm-sd-scoped", "sm-sd-invoke", "sm-sd-other"
SD = "/v1/service_discovery/targets"
EMPTY_KEY = "sm-sd-empty"


def _declarations():
    return {
        "organizations": [
            org(
                "acme",
                {
                    KEY: "WORKSPACE_EXPORT_METRICS",
                    SCOPED_KEY: "WORKSPACE_EXPORT_METRICS",
                    INVOKE_KEY: "WORKSPACE_INVOKE",
                },
                scoped={SCOPED_KEY: ["m2"]},
            ),
            org("other", {OTHER_KEY: "WORKSPACE_MANAGE_ALL"}),
            org("empty", {EMPTY_KEY: "PERSONAL"}),
        ],
        "models": [
            {
                "id": "m1",
                "name": "llama",
                "organization": "acme",
                "deployments": [
                    {
                        "id": "d1",
                        "name": "v1",
                        "replicas": [
                            {
                                "id": "d1-r1",
                                "targets": [
                                    "http://10.0.0.5:8000/metrics",
                                    "https://gpu-node.internal/dcgm/metrics?format=text&x=1",
                                ],
                            }
                        ],
                    },
                    {
                        "id": "d2",
                        "name": "v2",
                        "replicas": [{"id": "d2-r1", "targets": ["http://[::1]:9400/m"]}],
                    },
                ],
                "environments": [
                    {
                        "name": "production",
                        "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}],
                    }
                ],
            },
            {
                "id": "m2",
                "name": "whisper",
                "organization": "acme",
                "deployments": [
                    {"id": "e1", "replicas": [{"id": "e1-r1", "targets": ["http://h2:8000/metrics"]}]}
                ],
            },
            {
                "id": "x1",
                "name": "theirs",
                "organization": "other",
                "deployments": [
                    {"id": "x1d", "replicas": [{"id": "x-r1", "targets": ["http://x:1/metrics"]}]}
                ],
            },
        ],
        "loops": [
            {
                "id": "t1",
                "organization": "acme",
                "sampler": {"model": "m1"},
                "nodes": [
                    {
                        "id": "worker-1",
                        "targets": [{"url": "http://10.0.1.6:9400/metrics", "kind": "dcgm"}],
                    },
                    {
                        "id": "leader-0",
                        "role": "leader",
                        "targets": [
                            {"url": "http://10.0.1.5:9400/metrics", "kind": "dcgm"},
                            {"url": "http://u:secret@10.0.1.5:10255/metrics/cadvisor", "kind": "kubelet"},
                            {"url": "http://10.0.1.5:10255/stats/summary", "kind": "kubelet_summary"},
                            {"url": "https://10.0.1.5/q?format=prom", "kind": "requests"},
                        ],
                    },
                ],
            },
            {
                "id": "t2",
                "organization": "acme",
                "sampler": {"model": "m2"},
                "nodes": [
                    {
                        "id": "n0",
                        "role": "leader",
                        "targets": [{"url": "http://10.0.2.5:9100/metrics", "kind": "node_exporter"}],
                    }
                ],
            },
            {
                "id": "t3",
                "organization": "acme",
                "nodes": [
                    {
                        "id": "n0",
                        "role": "leader",
                        "targets": [{"url": "http://10.0.3.5:9400/metrics", "kind": "dcgm"}],
                    }
                ],
            },
            {
                "id": "tx",
                "organization": "other",
                "nodes": [
                    {
                        "id": "n0",
                        "role": "leader",
                        "targets": [{"url": "http://x:9400/metrics", "kind": "dcgm"}],
                    }
                ],
            },
        ],
    }


def trainer_group(address, trainer, node, path="/metrics", scheme="http", **params):
    labels = {"__metrics_path__": path, "__scheme__": scheme, "deployment_id": trainer, "node_id": node}
    return {"targets": [address], "labels": {**labels, **{f"__param_{k}": v for k, v in params.items()}}}


@pytest.fixture
def client(serve: Serve) -> TestClient:
    return serve(_declarations(), gateway=False, clock=lambda: at(120))


def get(client, key=KEY):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.get(SD, headers=headers)


def test_targets_of_the_organization_with_scrape_labels(client):
    resp = get(client)
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    llama = {"model_id": "m1", "model_name": "llama"}
    assert resp.json() == [
        {
            "targets": ["10.0.0.5:8000"],
            "labels": {
                "__metrics_path__": "/metrics",
                "__scheme__": "http",
                **llama,
                "deployment_id": "d1",
                "replica": "d1-r1",
                "environment": "production",
                "rollout_phase": "stable",
            },
        },
        {
            "targets": ["gpu-node.internal:443"],  # the scheme's default port made explicit
            "labels": {
                "__metrics_path__": "/dcgm/metrics",
                "__scheme__": "https",
                **llama,
                "deployment_id": "d1",
                "replica": "d1-r1",
                "environment": "production",
                "rollout_phase": "stable",
                "__param_format": "text",
                "__param_x": "1",
            },
        },
        {
            "targets": ["[::1]:9400"],
            "labels": {
                "__metrics_path__": "/m",
                "__scheme__": "http",
                **llama,
                "deployment_id": "d2",
                "replica": "d2-r1",
                "environment": "",  # d2 serves no environment (Prometheus drops empty labels)
                "rollout_phase": "",
            },
        },
        {
            "targets": ["h2:8000"],
            "labels": {
                "__metrics_path__": "/metrics",
                "__scheme__": "http",
                "model_id": "m2",
                "model_name": "whisper",
                "deployment_id": "e1",
                "replica": "e1-r1",
                "environment": "",
                "rollout_phase": "",
            },
        },
        # trainer nodes (regression: they were missing): by trainer id, leader first, targets as declared;
        # the kubelet Summary API (JSON) is left out, the kubelet URL's credentials are not passed on
        trainer_group("10.0.1.5:9400", "t1", "leader-0"),
        trainer_group("10.0.1.5:10255", "t1", "leader-0", path="/metrics/cadvisor"),
        trainer_group("10.0.1.5:443", "t1", "leader-0", path="/q", scheme="https", format="prom"),
        trainer_group("10.0.1.6:9400", "t1", "worker-1"),
        trainer_group("10.0.2.5:9100", "t2", "n0"),
        trainer_group("10.0.3.5:9400", "t3", "n0"),
    ]
    assert "secret" not in resp.text


def test_labels_are_the_ones_our_scraper_attaches(client):
    registry = client.app.state.service.registry
    ours = {t.url: dict(t.labels) for t in scrape_targets(registry)}
    groups = get(client).json()
    for group in groups:
        plain = {k: v for k, v in group["labels"].items() if not k.startswith("__")}
        assert plain in ours.values()
    # replicas: four of acme, one of other; trainer targets: seven of acme (one kubelet_summary), one of
    # other
    assert len(ours) == 13
    assert len(groups) == 4 + 6


def test_scoped_and_other_organization_keys(client):
    # a key scoped to m2 sees m2's replicas and the trainers whose sampler is m2 (as GET
    # /v1/loops/deployments), not t1 (sampler m1) nor t3 (no sampler)
    scoped = get(client, SCOPED_KEY).json()
    assert [(g["labels"].get("replica"), g["labels"].get("node_id")) for g in scoped] == [
        ("e1-r1", None),
        (None, "n0"),
    ]
    assert scoped[1] == trainer_group("10.0.2.5:9100", "t2", "n0")
    assert [g["targets"] for g in get(client, OTHER_KEY).json()] == [["x:1"], ["x:9400"]]


def test_unknown_query_parameters_are_400(client):
    resp = client.get(SD, params={"model_id": "m1"}, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "unknown query parameter(s): model_id; this endpoint takes no query parameters"
    }


def test_terminated_replicas_leave_and_an_empty_list_is_200(client):
    registry = client.app.state.service.registry
    registry.deployments.terminate_replica("m2", "e1", "e1-r1")
    assert get(client, SCOPED_KEY).json() == [trainer_group("10.0.2.5:9100", "t2", "n0")]
    resp = get(client, EMPTY_KEY)  # an organization with no models nor trainers
    assert resp.status_code == 200 and resp.json() == []


def test_auth(client):
    assert get(client, None).status_code == 401
    assert get(client, "nope").status_code == 401
    resp = get(client, INVOKE_KEY)
    assert resp.status_code == 403 and "WORKSPACE_EXPORT_METRICS" in resp.json()["error"]


def test_replica_labels_come_in_the_registry_label_order(client):
    """The JSON lists a replica target's registry labels in ``TARGET_LABELS`` order, as it always has."""
    replica_groups = [g for g in get(client).json() if "replica" in g["labels"]]
    assert replica_groups
    for group in replica_groups:
        assert [k for k in group["labels"] if not k.startswith("__")] == [
            "model_id",
            "model_name",
            "deployment_id",
            "replica",
            "environment",
            "rollout_phase",
        ]
