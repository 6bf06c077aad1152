"""Issue 12 part 5: a refused id tells nothing about another organization.

Ids stay global (docs/management.md "Ids are global": series carry ``model_id`` and ``deployment_id``
with no organization label), so a taken id must be refused; the refusal is the same status and the same
body whether the caller's organization or another holds the id, and whether a model deployment or a
trainer deployment holds it. A model of another organization reads exactly as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.apptools import auth, build_app, org

MINE, THEIRS = "k-acme-manage", "k-evil-manage"


def _trainer(trainer_id: str, organization: str) -> dict:
    return {"id": trainer_id, "organization": organization, "nodes": [{"id": "n0", "role": "leader"}]}


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    declarations = {
        "organizations": [
            org("acme", {MINE: "WORKSPACE_MANAGE_ALL"}),
            org("evil", {THEIRS: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {"id": "mine", "organization": "acme", "deployments": [{"id": "d-mine"}]},
            {"id": "hers", "organization": "evil", "deployments": [{"id": "d-hers"}]},
        ],
        "loops": [_trainer("t-mine", "acme"), _trainer("t-hers", "evil")],
    }
    with TestClient(build_app(tmp_path, declarations, gateway=False)) as c:
        yield c


def _answer(resp) -> tuple[int, dict, str]:
    return resp.status_code, resp.json(), resp.headers["content-type"]


@pytest.mark.parametrize("model_id", ["mine", "hers"])
def test_a_taken_model_id_reads_the_same_whoever_holds_it(client: TestClient, model_id: str) -> None:
    resp = client.post("/v1/models", json={"id": model_id, "name": "x"}, headers=auth(MINE))
    assert _answer(resp) == (
        409,
        {"error": f"model id {model_id!r} is taken; choose another id or omit it"},
        "application/json",
    )


@pytest.mark.parametrize("taken", ["d-mine", "d-hers", "t-mine", "t-hers"])
def test_a_taken_deployment_id_reads_the_same_whoever_and_whatever_holds_it(
    client: TestClient, taken: str
) -> None:
    resp = client.post("/v1/models/mine/deployments", json={"id": taken, "name": "x"}, headers=auth(MINE))
    assert _answer(resp) == (
        409,
        {"error": f"deployment id {taken!r} is taken; choose another id"},
        "application/json",
    )
    listed = client.get("/v1/models/mine/deployments", headers=auth(MINE)).json()["deployments"]
    assert [d["id"] for d in listed] == ["d-mine"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/models/{}", None),
        ("GET", "/v1/models/{}/deployments", None),
        ("POST", "/v1/models/{}/deployments", {"name": "x"}),
        ("GET", "/v1/models/{}/environments/production/metrics", None),
    ],
)
def test_another_orgs_model_answers_as_a_missing_one(client: TestClient, method, path, body) -> None:
    """``hers`` (of evil) and ``nobody`` (of no one) differ only in the id echoed back."""
    theirs = client.request(method, path.format("hers"), json=body, headers=auth(MINE))
    missing = client.request(method, path.format("nobody"), json=body, headers=auth(MINE))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == {"error": missing.json()["error"].replace("'nobody'", "'hers'")}


def test_another_orgs_trainer_answers_as_a_missing_one(client: TestClient) -> None:
    theirs = client.get("/v1/loops/deployments/t-hers", headers=auth(MINE))
    missing = client.get("/v1/loops/deployments/t-nobody", headers=auth(MINE))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == {"error": missing.json()["error"].replace("'t-nobody'", "'t-hers'")}
