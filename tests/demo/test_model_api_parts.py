"""The demo's Model API parts without replicas: its config (teams, keys, ``demo-chat`` and each team's
limits, read back through the service in process) and the table's per-team figures and agreement line
on a hand-written SUMMARY."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from servemetrics.demo import model_api_report
from servemetrics.demo.topology import MODEL_API, make_topology, service_config
from tests.apptools import auth, build_app

KEY = "demo-mapi-key"
TEAM_KEYS = {"research": f"{KEY}-research", "support": f"{KEY}-support"}


def test_each_team_key_reads_its_own_limits_on_demo_chat(tmp_path: Path) -> None:
    topo = make_topology(18421, list(range(18422, 18428)))
    config = service_config(topo, tmp_path / "data", KEY, team_keys=TEAM_KEYS)
    with TestClient(build_app(tmp_path, config, gateway=False)) as client:
        limits = {
            team: client.get(f"/v1/model_apis/{MODEL_API}", headers=auth(key)).json()["rate_limits"]
            for team, key in TEAM_KEYS.items()
        }
        listed = client.get("/v1/model_apis", headers=auth(KEY)).json()
    assert limits == {
        "research": [
            {"type": "REQUEST", "unit": "MINUTE", "threshold": 300},
            {"type": "TOKEN", "unit": "MINUTE", "threshold": 100_000},
        ],
        "support": [{"type": "REQUEST", "unit": "MINUTE", "threshold": 12}],
    }
    assert [api["name"] for api in listed["items"]] == ["demo-chat"]


SUMMARY = {
    "metric_descriptors": [
        {
            "name": "baseten_model_api_inference_requests_total",
            "label_sets": [
                {"team_id": t, "status": c} for t in ("research", "support") for c in ("2xx", "4xx", "5xx")
            ],
        },
        {"name": "baseten_model_api_rate_limited_requests_total", "label_sets": [{"team_id": "support"}]},
        {
            "name": "baseten_model_api_tokens_total",
            "label_sets": [
                {"team_id": t, "token_type": k}
                for t in ("research", "support")
                for k in ("input_cached", "input_uncached", "output")
            ],
        },
    ],
    "metric_values": [{"values": [[58, 0, 0, 23, 38, 0], [38], [907, 10302, 786, 409, 4087, 359]]}],
}
"""A SUMMARY as the Model API metrics route answers it: research has no rate-limited series."""


def test_per_team_figures_and_the_agreement_line() -> None:
    teams = model_api_report.per_team(SUMMARY)
    assert teams["research"] == {
        "2xx": 58,
        "4xx": 0,
        "5xx": 0,
        "rate limited": 0,  # no series: 0
        "input_cached": 907,
        "input_uncached": 10302,
        "output": 786,
    }
    assert teams["support"]["rate limited"] == 38 and teams["support"]["4xx"] == 38
    counts = {"research": {"2xx": 58}, "support": {"2xx": 23, "4xx": 38, "rate limited": 38}}
    tokens = {
        "research": {"input_cached": 907, "input_uncached": 10302, "output": 786},
        "support": {"input_cached": 409, "input_uncached": 4087, "output": 359},
    }
    research, support = model_api_report.agreement(counts, tokens, SUMMARY)
    assert research.endswith(": equal") and support.endswith(": equal")
    assert support.startswith(
        "model API calls counted by the client, team support: 2xx 23, 4xx 38, 5xx 0, rate limited 38, "
    )
    counts["support"]["rate limited"] = 37  # one 429 the client did not see as a team limit
    assert model_api_report.agreement(counts, tokens, SUMMARY)[1].endswith(": DIFFERENT")
