"""Creating models, deployments and replicas with targets through the API (no YAML)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Serve
from tests.apptools import auth, org

MANAGE, READ, OTHER = "inv-manage", "inv-read", "inv-other"
ID_RULE = "use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"


@pytest.fixture
def client(serve: Serve) -> TestClient:
    acme = org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL", READ: "WORKSPACE_EXPORT_METRICS"})
    return serve({"organizations": [acme, org("other", {OTHER: "WORKSPACE_MANAGE_ALL"})]})


def h(key: str) -> dict[str, str]:
    return auth(key)


def test_create_model_deployment_and_replica_then_list(client):
    model = client.post("/v1/models", json={"id": "llama", "name": "Llama"}, headers=h(MANAGE))
    assert model.status_code == 201 and model.json()["id"] == "llama" and model.json()["team_name"] == "acme"
    dep = client.post(
        "/v1/models/llama/deployments",
        headers=h(MANAGE),
        json={"id": "v1", "name": "first", "instance_type": {"gpu_type": "H100", "gpu_count": 2}},
    )
    assert dep.status_code == 201, dep.text
    assert dep.json()["gpu_count"] == 2 and dep.json()["gpu_type"] == "H100"
    rep = client.post(
        "/v1/models/llama/deployments/v1/replicas",
        headers=h(MANAGE),
        json={"id": "r1", "targets": ["http://10.0.0.11:9101/metrics"]},
    )
    assert rep.status_code == 201 and rep.json()["targets"] == ["http://10.0.0.11:9101/metrics"]
    listed = client.get("/v1/models/llama/deployments/v1/replicas", headers=h(READ)).json()["replicas"]
    assert [(r["id"], r["status"], r["targets"]) for r in listed] == [
        ("r1", "ACTIVE", ["http://10.0.0.11:9101/metrics"])
    ]
    events = client.get(
        "/v1/models/llama/events",
        headers=h(READ),
        params={"start_epoch_millis": 0, "end_epoch_millis": 2**53 - 1},
    ).json()
    assert "DEPLOYED" in [e["kind"] for e in events["events"]]


def test_taken_ids_conflict_and_other_orgs_cannot_touch(client):
    assert client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE)).status_code == 201
    taken = client.post("/v1/models", json={"id": "m1", "name": "b"}, headers=h(OTHER))
    assert taken.status_code == 409 and "taken" in taken.json()["error"]
    assert client.get("/v1/models/m1", headers=h(MANAGE)).json()["team_name"] == "acme"  # not moved
    foreign = client.post("/v1/models/m1/deployments", json={"name": "x"}, headers=h(OTHER))
    assert foreign.status_code == 404
    assert (
        client.post(
            "/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE)
        ).status_code
        == 201
    )
    again = client.post("/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE))
    assert again.status_code == 409


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/v1/models", {"id": "bad id!", "name": "x"}, "id"),
        ("/v1/models", {"name": ""}, "name"),
        ("/v1/models", {"name": "x", "colour": "red"}, "colour"),
    ],
)
def test_bad_bodies_are_400(client, path, body, needle):
    resp = client.post(path, json=body, headers=h(MANAGE))
    assert resp.status_code == 400 and needle in resp.json()["error"]


@pytest.mark.parametrize(
    "instance_type", [{"gpu_count": False}, {"gpu_count": "2"}, {"gpu_count": 1.0}, {"gpu_type": 7}]
)
def test_instance_type_fields_are_not_coerced(client, instance_type):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    body = {"id": "d1", "name": "x", "instance_type": instance_type}
    resp = client.post("/v1/models/m1/deployments", json=body, headers=h(MANAGE))
    assert resp.status_code == 400 and next(iter(instance_type)) in resp.json()["error"], resp.text
    assert client.get("/v1/models/m1/deployments/d1", headers=h(MANAGE)).status_code == 404


def test_replica_targets_must_be_urls_and_readers_cannot_create(client):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    client.post("/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE))
    bad = client.post(
        "/v1/models/m1/deployments/d1/replicas",
        json={"id": "r1", "targets": ["localhost:9100"]},
        headers=h(MANAGE),
    )
    assert bad.status_code == 400 and "http://" in bad.json()["error"]
    assert client.post("/v1/models", json={"name": "x"}, headers=h(READ)).status_code == 403


@pytest.mark.parametrize("dep_id", ["production", "development"])
def test_reserved_deployment_ids_are_400(client, dep_id):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    res = client.post("/v1/models/m1/deployments", json={"id": dep_id, "name": "x"}, headers=h(MANAGE))
    assert (res.status_code, res.json()) == (
        400,
        {
            "error": f"invalid request: id: deployment id {dep_id!r} is reserved: `production` and "
            "`development` name the deployment that environment serves; choose another id"
        },
    )


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        (
            "/v1/models",
            {"id": "a/b", "name": "x"},
            f"id: 'a/b' is not a valid model id: {ID_RULE}",
        ),
        (
            "/v1/models/m1/deployments",
            {"id": " ", "name": "x"},
            f"id: ' ' is not a valid deployment id: {ID_RULE}",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r 9"},
            f"id: 'r 9' is not a valid replica id: {ID_RULE}",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r9", "targets": ["http://"]},
            "targets.0: target 'http://' has no host; write e.g. http://10.0.0.5:8080/metrics",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r9", "targets": ["http://exa mple/metrics"]},
            "targets.0: target 'http://exa mple/metrics' contains whitespace; write e.g. "
            "http://10.0.0.5:8080/metrics",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r9", "targets": ["ftp://x/metrics"]},
            "targets.0: target 'ftp://x/metrics' is not an http:// or https:// URL; write e.g. "
            "http://10.0.0.5:8080/metrics",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r9", "targets": ["http://h:99999/metrics"]},
            "targets.0: target 'http://h:99999/metrics' has port 99999, not a number from 1 to 65535; "
            "write e.g. http://10.0.0.5:8080/metrics",
        ),
        (
            "/v1/models/m1/deployments/d1/replicas",
            {"id": "r9", "targets": ["http://h.example:0/m"]},
            "targets.0: target 'http://h.example:0/m' has port 0, not a number from 1 to 65535; "
            "write e.g. http://10.0.0.5:8080/metrics",
        ),
    ],
)
def test_ids_and_targets_say_what_is_allowed(client, path, body, error):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    client.post("/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE))
    res = client.post(path, json=body, headers=h(MANAGE))
    assert (res.status_code, res.json()) == (400, {"error": f"invalid request: {error}"})
    assert client.get("/v1/models/m1/deployments/d1/replicas", headers=h(MANAGE)).json()["replicas"] == []


def test_a_form_encoded_body_says_to_send_json(client):
    """`curl -d '{...}'` sends application/x-www-form-urlencoded: say which header fixes it."""
    resp = client.post(
        "/v1/models",
        content=b'{"name": "x"}',
        headers={**h(MANAGE), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert resp.status_code == 400
    assert "Content-Type: application/json" in resp.json()["error"]


def test_registering_a_replica_again_updates_its_targets_and_status(client):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    client.post("/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE))
    client.post("/v1/models/m1/deployments", json={"id": "d2", "name": "y"}, headers=h(MANAGE))
    path = "/v1/models/m1/deployments/d1/replicas"
    old, new = "http://10.0.0.11:9101/metrics", "http://10.0.0.12:9101/metrics"
    assert client.post(path, json={"id": "r1", "targets": [old]}, headers=h(MANAGE)).status_code == 201
    assert client.delete(f"{path}/r1", headers=h(MANAGE)).json() == {"success": True}
    again = client.post(path, json={"id": "r1", "targets": [new, old]}, headers=h(MANAGE))
    assert again.status_code == 201, again.text
    body = again.json()
    assert (body["id"], body["status"], body["terminated_at"], body["targets"]) == (
        "r1",
        "ACTIVE",
        None,
        [new, old],
    )
    assert client.post(path, json={"id": "r1", "targets": [new]}, headers=h(MANAGE)).json()["targets"] == [
        new
    ]
    listed = client.get(path, headers=h(READ)).json()["replicas"]
    assert [(r["id"], r["status"], r["targets"]) for r in listed] == [("r1", "ACTIVE", [new])]
    kinds = {"kinds": "REPLICA_TERMINATED,REPLICA_RECOVERED"}
    events = client.get("/v1/models/m1/events", headers=h(READ), params=kinds).json()["events"]
    assert [(e["kind"], e["details"]["old_status"], e["details"]["status"]) for e in events] == [
        ("REPLICA_TERMINATED", "ACTIVE", "TERMINATED"),
        ("REPLICA_RECOVERED", "TERMINATED", "ACTIVE"),
    ]
    # the same id under another deployment is that deployment's own replica; d1's keeps its target
    other = client.post("/v1/models/m1/deployments/d2/replicas", json={"id": "r1"}, headers=h(MANAGE))
    assert (other.status_code, other.json()["deployment_id"], other.json()["targets"]) == (201, "d2", [])
    assert client.get(path, headers=h(READ)).json()["replicas"][0]["targets"] == [new]


def test_registering_a_replica_elsewhere_is_a_404_that_says_so(client):
    client.post("/v1/models", json={"id": "m1", "name": "a"}, headers=h(MANAGE))
    client.post("/v1/models/m1/deployments", json={"id": "d1", "name": "x"}, headers=h(MANAGE))
    client.post("/v1/models", json={"id": "m2", "name": "b"}, headers=h(MANAGE))
    client.post("/v1/models/m2/deployments", json={"id": "e1", "name": "z"}, headers=h(MANAGE))
    body = {"id": "r1", "targets": ["http://10.0.0.13:9101/metrics"]}
    foreign = client.post("/v1/models/m1/deployments/d1/replicas", json=body, headers=h(OTHER))
    assert foreign.status_code == 404 and "m1" in foreign.json()["error"]  # another organization's model
    wrong = client.post("/v1/models/m1/deployments/e1/replicas", json=body, headers=h(MANAGE))
    assert (wrong.status_code, wrong.json()) == (
        404,
        {"error": "model 'm1' has no deployment 'e1'; list them with GET /v1/models/m1/deployments"},
    )
    assert client.get("/v1/models/m1/deployments/d1/replicas", headers=h(MANAGE)).json() == {"replicas": []}
    assert client.get("/v1/models/m2/deployments/e1/replicas", headers=h(MANAGE)).json() == {"replicas": []}
