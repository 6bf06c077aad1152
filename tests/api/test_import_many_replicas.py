"""Import of a file of many replicas (issue 18: one call for a whole W1 file, as VictoriaMetrics imports
one): without ``--model/--deployment/--replica`` (``POST /v1/import`` without its three parameters) each
series names its own in ``model_id``, ``deployment_id`` and ``replica`` labels, checked like
remote_write's: a declared deployment (``--config``), one of a model of the caller's organization (the
route: 404 otherwise), nothing of that batch stored.

The file (counters, a point every 15 s from T0): d1-r1 requests 0, 3, 7; d1-r2 0, 5, 6; d2-r1 0, 2, 10.
By hand, over [T0, T0 + 60 s): d1 counts 7 + 6 = 13 (r1 7, r2 6), d2 counts 10.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from servemetrics import cli
from servemetrics.store import open_store
from tests.api.conftest import Serve
from tests.apptools import auth, org
from tests.query.helpers import T0, at

REQ = "baseten_inference_requests_total"
MANAGE, READ = "manage-key", "read-key"
MODELS = [
    {"id": "m1", "name": "M", "organization": "acme", "deployments": [{"id": "d1"}, {"id": "d2"}]},
    {"id": "m2", "organization": "other", "deployments": [{"id": "x1"}]},
]
DECLARATIONS = {
    "organizations": [
        org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL", READ: "WORKSPACE_EXPORT_METRICS"}),
        org("other"),
    ],
    "models": MODELS,
}


def _config(data: Path) -> str:
    """The service config of ``DECLARATIONS``' organization acme over ``data``, as a YAML file holds it."""
    acme = {"name": "acme", "api_keys": [{"key": MANAGE, "type": "WORKSPACE_MANAGE_ALL"}]}
    return yaml.safe_dump({"data_dir": str(data), "organizations": [acme], "models": MODELS[:1]})


POINTS = {
    ("m1", "d1", "d1-r1"): (0, 3, 7),
    ("m1", "d1", "d1-r2"): (0, 5, 6),
    ("m1", "d2", "d2-r1"): (0, 2, 10),
}


def _file(points: dict[tuple[str, str, str], tuple[int, ...]] = POINTS, labels: bool = True) -> bytes:
    lines = ["# TYPE baseten_inference_requests counter"]
    for (model, dep, replica), values in points.items():
        target = f'model_id="{model}",deployment_id="{dep}",replica="{replica}",' if labels else ""
        for i, v in enumerate(values):
            ts = (T0 + 15_000 * i) / 1000
            lines.append(f'{REQ}{{{target}status_code="200"}} {v} {ts:.3f}')
    return ("\n".join(lines) + "\n# EOF\n").encode()


def _count(client: TestClient, dep: str, group_by: str | None = None) -> dict[str, float]:
    """Requests 2xx of ``dep`` over [T0, T0 + 60 s): {replica or "": count}."""
    params = {"mode": "SUMMARY", "metrics": REQ, "start_epoch_millis": T0, "end_epoch_millis": at(60)}
    body = client.get(
        f"/v1/models/m1/deployments/{dep}/metrics",
        headers=auth(READ),
        params={**params, **({"group_by": group_by} if group_by else {})},
    ).json()
    if not body["metric_descriptors"]:
        return {}
    [descriptor] = body["metric_descriptors"]
    sets, values = descriptor["label_sets"], body["metric_values"][0]["values"][0]
    return {s.get("replica", ""): v for s, v in zip(sets, values, strict=True) if s["status"] == "2xx"}


def test_the_cli_imports_a_file_of_many_replicas_with_their_own_labels(tmp_path: Path, serve: Serve) -> None:
    config = tmp_path / "sm.yaml"
    config.write_text(_config(tmp_path))
    om = tmp_path / "many.om"
    om.write_bytes(_file())
    result = CliRunner().invoke(cli.app, ["import", str(om), "--config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert "stored 9 samples" in result.stderr
    client = serve(DECLARATIONS, clock=lambda: at(600), store=open_store(tmp_path))
    assert _count(client, "d1") == {"": 13.0}
    assert _count(client, "d1", "replica") == {"d1-r1": 7.0, "d1-r2": 6.0}
    assert _count(client, "d2") == {"": 10.0}


def test_the_cli_refuses_some_of_the_three_options_and_undeclared_or_unlabelled_series(
    tmp_path: Path,
) -> None:
    config = tmp_path / "sm.yaml"
    config.write_text(_config(tmp_path))
    om = tmp_path / "many.om"
    om.write_bytes(_file())
    some = CliRunner().invoke(cli.app, ["import", str(om), "--model", "m1", "--config", str(config)])
    assert some.exit_code == 2
    assert "give --model, --deployment and --replica together" in some.stderr
    om.write_bytes(_file({**POINTS, ("m1", "d9", "d9-r1"): (1, 2)}))
    undeclared = CliRunner().invoke(cli.app, ["import", str(om), "--config", str(config)])
    assert undeclared.exit_code == 1
    assert "stopped after 0 samples: no deployment 'd9' of model 'm1'" in " ".join(undeclared.stderr.split())
    om.write_bytes(_file({("m1", "d1", "d1-r1"): (0, 3, 7)}, labels=False))
    bare = CliRunner().invoke(cli.app, ["import", str(om), "--config", str(config)])
    assert bare.exit_code == 1
    assert "a series has no model_id or deployment_id label" in " ".join(bare.stderr.split())


def test_the_route_imports_many_replicas_and_checks_each_series_owner(serve: Serve) -> None:
    client = serve(DECLARATIONS, clock=lambda: at(600))
    manage = auth(MANAGE, "Bearer")
    foreign = client.post(
        "/v1/import", content=_file({**POINTS, ("m2", "x1", "x1-r1"): (1, 2)}), headers=manage
    )
    assert foreign.status_code == 404, foreign.text
    assert foreign.json()["error"].startswith("import stopped after 0 samples: ")
    bare = client.post(
        "/v1/import", content=_file({("m1", "d1", "d1-r1"): (0, 3, 7)}, labels=False), headers=manage
    )
    assert bare.status_code == 400
    assert "every series needs model_id and deployment_id labels; label every series" in bare.json()["error"]
    some = client.post("/v1/import", params={"model_id": "m1"}, content=_file(), headers=manage)
    assert some.status_code == 400 and "together" in some.json()["error"]
    assert _count(client, "d1") == {}  # nothing of the refused files was stored
    ok = client.post("/v1/import", content=_file(), headers=manage)
    assert ok.status_code == 200, ok.text
    assert ok.json()["samples"] == 9
    assert _count(client, "d1", "replica") == {"d1-r1": 7.0, "d1-r2": 6.0}
    assert _count(client, "d2") == {"": 10.0}
