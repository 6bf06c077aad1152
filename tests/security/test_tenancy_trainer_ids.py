"""Issue 12 part 2: another organization cannot write into a trainer's metrics by registering a model
deployment under the trainer's id (or a trainer under a deployment's id), and a registry that already holds
such a pair (written before the check) answers the trainer's metrics with a 409, never a mix.

Two organizations over the hand-computed trainer data set (``tests/loops/data.py``): ``acme`` owns
trainer ``t1``; ``evil`` owns model ``mx`` with deployment ``dx`` and a managing key.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from servemetrics.registry import Conflict, TrainerNode
from servemetrics.registry import tables as t
from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.apptools import auth, build_app, org
from tests.loops import data
from tests.query.helpers import T0, at

VICTIM, ATTACKER = "k-acme-manage", "k-evil-manage"
WINDOW = {
    "start_epoch_millis": T0,
    "end_epoch_millis": at(120),
    "step_seconds": 30,
    "time_divisor_seconds": 60,
}
VICTIM_VOLUME = [138.0, 0.0, 0.0, 0.0]  # 2.3 req/s x 60 in point 0 (tests/loops/data.py), then 0
VICTIM_CPU = [3.5, 3.5, 3.5, 1.75]  # the last point holds only the pair (90, 105] (tests/loops/data.py)


def declarations() -> dict:
    leader = {
        "id": data.LEADER,
        "role": "leader",
        "gpu_ranks": [0, 1],
        "pod": "trainer-0",
        "namespace": "loops",
        "targets": [{"url": data.REQUEST_URL, "kind": "requests"}],
    }
    worker = {"id": data.WORKER, "role": "worker", "gpu_ranks": [0, 1]}
    return {
        "organizations": [
            org("acme", {VICTIM: "WORKSPACE_MANAGE_ALL"}),
            org("evil", {ATTACKER: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [{"id": "mx", "organization": "evil", "deployments": [{"id": "dx"}]}],
        "loops": [{"id": data.TRAINER, "organization": "acme", "nodes": [leader, worker]}],
    }


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    store = data.load(MemoryStore())
    app = build_app(tmp_path, declarations(), gateway=False, clock=lambda: at(120), store=store)
    with TestClient(app) as c:
        yield c


def attacker_requests(deployment_id: str) -> bytes:
    """6,000 requests of ``evil`` labelled as the victim's leader node, in point 0 of the window."""
    lab = labels_of(
        {"model_id": "mx", "deployment_id": deployment_id, "node_id": data.LEADER, "status_code": "200"}
    )
    points = [(-15, 0.0), (0, 6000.0), (15, 6000.0), (30, 6000.0)]
    return encode_write_request(
        [Sample("baseten_inference_requests_total", lab, v, at(s)) for s, v in points]
    )


def victim_metrics(client: TestClient) -> dict:
    resp = client.post(f"/v1/loops/deployments/{data.TRAINER}/metrics", json=WINDOW, headers=auth(VICTIM))
    assert resp.status_code == 200, resp.text
    return resp.json()["metrics"]


def test_a_deployment_under_another_orgs_trainer_id_is_refused_and_its_samples_stay_out(client):
    before = victim_metrics(client)
    assert [p["value"] for p in before["inference_volume"]] == pytest.approx(VICTIM_VOLUME)

    made = client.post(
        "/v1/models/mx/deployments", json={"id": data.TRAINER, "name": "squat"}, headers=auth(ATTACKER)
    )
    assert made.status_code == 409
    assert made.json() == {"error": "deployment id 't1' is taken; choose another id"}
    # the push under the trainer's id names no deployment of evil's model: refused, nothing stored
    pushed = client.post("/api/v1/write", content=attacker_requests(data.TRAINER), headers=auth(ATTACKER))
    assert pushed.status_code == 404
    # the push under evil's own deployment (same node_id label) is stored, and stays evil's
    own = client.post("/api/v1/write", content=attacker_requests("dx"), headers=auth(ATTACKER))
    assert own.status_code == 204

    after = victim_metrics(client)
    assert [p["value"] for p in after["inference_volume"]] == pytest.approx(VICTIM_VOLUME)
    assert [p["value"] for p in after["cpu_usage"]] == pytest.approx(VICTIM_CPU)
    assert after == before
    models = client.get("/v1/models/mx/deployments", headers=auth(ATTACKER)).json()["deployments"]
    assert [d["id"] for d in models] == ["dx"]


def test_a_trainer_under_another_orgs_deployment_id_is_refused_with_the_same_words(client):
    registry = client.app.state.service.registry
    nodes = [TrainerNode("n0", "leader", (0,), None, None, ())]
    with pytest.raises(Conflict) as err:
        registry.trainers.put_trainer_deployment("acme", "dx", "trainer", nodes)
    assert str(err.value) == "trainer deployment id 'dx' is taken; choose another id"
    with pytest.raises(Conflict) as err:  # another organization's trainer: the same words
        registry.trainers.put_trainer_deployment("evil", data.TRAINER, "trainer", nodes)
    assert str(err.value) == "trainer deployment id 't1' is taken; choose another id"
    assert registry.trainers.trainer_deployment("dx", None) is None


def test_a_pair_written_before_the_check_is_a_409_not_a_mix(client):
    registry = client.app.state.service.registry
    with registry.engine.begin() as conn:  # what an older version let the API write
        conn.execute(
            insert(t.deployments).values(id=data.TRAINER, model_id="mx", name="squat", created_at_ms=T0)
        )
    assert registry.trainers.shares_deployment_id(data.TRAINER)
    resp = client.post(f"/v1/loops/deployments/{data.TRAINER}/metrics", json=WINDOW, headers=auth(VICTIM))
    assert resp.status_code == 409
    assert resp.json() == {
        "error": "trainer deployment 't1' has the id of a model deployment registered before ids were "
        "checked across kinds, so its series cannot be told apart from that deployment's; declare the "
        "trainer under another id"
    }
    # the attacker still sees no trainer of acme's
    other = client.get(f"/v1/loops/deployments/{data.TRAINER}", headers=auth(ATTACKER))
    assert other.status_code == 404
