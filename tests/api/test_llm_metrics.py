"""The ``baseten_llm_*`` set over HTTP (issue 13 part 2): a vLLM replica and an SGLang replica of one
deployment scraped through the real ``Scraper`` into a store, read by ``GET /v1/models/{id}/deployments/
{d}/metrics`` and the environment route, answers validated against the spec."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.store.memory import MemoryStore
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import T0, at
from tests.scrape.test_continuity import STABLE, scrape
from tests.scrape.test_llm_set import R2

KEY = "sm-test-key-1"
IN, OUT = "baseten_llm_input_tokens_total", "baseten_llm_output_tokens_total"
SPEED, TTFT = "baseten_llm_output_tokens_per_second", "baseten_llm_time_to_first_token_seconds"
VLLM = """# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="m"}} {p}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} {g}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {a}
vllm:time_to_first_token_seconds_bucket{{le="0.2",model_name="m"}} {b}
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {b}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} {s}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {b}
"""
SGLANG = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m"}} {p}
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="m"}} {g}
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{le="0.15",model_name="m"}} {a}
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {a}
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {s}
sglang:time_to_first_token_seconds_count{{model_name="m"}} {a}
"""


def _declarations() -> dict:
    model = {
        "id": "m1",
        "name": "llama",
        "organization": "acme",
        "deployments": [{"id": "d1", "name": "v1"}],
        "environments": [
            {"name": "production", "promotions": [{"deployment": "d1", "at": "2025-12-31T00:00:00Z"}]}
        ],
    }
    return {"organizations": [org("acme", {KEY: "WORKSPACE_EXPORT_METRICS"})], "models": [model]}


@pytest.fixture
def client(serve: Serve) -> TestClient:
    """r1 (vLLM): 100 prompt / 1000 generated tokens, TTFT 2 <= 0.1 s and 2 in (0.1, 0.2] (sum 0.5);
    r2 (SGLang): 50 / 200 tokens, TTFT 2 <= 0.15 s (sum 0.2); scraped at T0 (zeros) and T0 + 15 s."""
    store = MemoryStore()
    r1 = [VLLM.format(p=0, g=0, a=0, b=0, s=0), VLLM.format(p=100, g=1000, a=2, b=4, s=0.5)]
    r2 = [SGLANG.format(p=0, g=0, a=0, s=0), SGLANG.format(p=50, g=200, a=2, s=0.2)]
    scrape(store, [(0, r1[0]), (0, r2[0]), (15, r1[1]), (15, r2[1])], [STABLE, R2] * 2)
    return serve(_declarations(), gateway=False, clock=lambda: at(120), store=store)


@pytest.mark.parametrize("path", ["deployments/d1", "environments/production"])
def test_llm_metrics_of_both_engines(client, metrics_response_validator, path) -> None:
    names = [IN, OUT, SPEED, TTFT, "baseten_llm_in_flight_tokens"]
    resp = client.get(
        f"/v1/models/m1/{path}/metrics",
        params={"mode": "SUMMARY", "start_epoch_millis": T0, "end_epoch_millis": at(30), "metrics": names},
        headers={"Authorization": f"Api-Key {KEY}"},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    metrics_response_validator.validate(body)
    # in-flight tokens have no engine source and no native series here: omitted
    assert [d["name"] for d in body["metric_descriptors"]] == names[:4]
    assert [d["unit_hint"] for d in body["metric_descriptors"]] == ["COUNT", "COUNT", "PER_SECOND", "SECONDS"]
    (values,) = [v["values"] for v in body["metric_values"]]
    assert values[0] == [150.0]  # 100 (vLLM) + 50 (SGLang) input tokens
    assert values[1] == [1200.0]  # 1000 + 200 output tokens
    assert values[2] == [pytest.approx(1200 / 30)]  # per second over the 30 s window
    # TTFT of both layouts together (tests/scrape/test_llm_set.py derives these): p50 0.09, p90 0.17,
    # p95 0.185, p99 0.197, avg 0.7 / 6
    assert values[3] == [pytest.approx(v) for v in (0.09, 0.17, 0.185, 0.197, 0.7 / 6)]
