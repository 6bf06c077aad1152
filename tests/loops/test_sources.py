"""Requests into the trainer from both Knative queue-proxy generations (exposition text -> adapters ->
store -> the Loops query): the same traffic gives the same answer. Two scrapes of the leader's request
target, at T0 - 15 s (nothing yet) and T0 + 15 s (30 requests), one 30 s point [T0, T0 + 30 s): the pair
(-15, 15] spreads its 30 requests over 30 s, and its 15 s (0, 15] inside the point bring 15 of them."""

from __future__ import annotations

import pytest

from servemetrics.api.loops_schemas import loops_metrics
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.query.loops import execute_loops
from servemetrics.query.loops_plan import LoopsNode, build_loops_plan
from servemetrics.samples import SampleBatch
from servemetrics.store.memory import MemoryStore
from tests.query.helpers import T0, at

OPENCENSUS = """# TYPE revision_app_request_count counter
revision_app_request_count{{response_code="200",response_code_class="2xx"}} {n}
# TYPE revision_app_request_latencies histogram
revision_app_request_latencies_bucket{{response_code="200",response_code_class="2xx",le="100"}} {b100}
revision_app_request_latencies_bucket{{response_code="200",response_code_class="2xx",le="200"}} {n}
revision_app_request_latencies_bucket{{response_code="200",response_code_class="2xx",le="+Inf"}} {n}
revision_app_request_latencies_sum{{response_code="200",response_code_class="2xx"}} {ms}
revision_app_request_latencies_count{{response_code="200",response_code_class="2xx"}} {n}
# TYPE revision_queue_depth gauge
revision_queue_depth 2
"""
OPENTELEMETRY = """# TYPE kn_serving_invocation_duration_seconds histogram
kn_serving_invocation_duration_seconds_bucket{{http_response_status_code="200",le="0.1"}} {b100}
kn_serving_invocation_duration_seconds_bucket{{http_response_status_code="200",le="0.2"}} {n}
kn_serving_invocation_duration_seconds_bucket{{http_response_status_code="200",le="+Inf"}} {n}
kn_serving_invocation_duration_seconds_sum{{http_response_status_code="200"}} {s}
kn_serving_invocation_duration_seconds_count{{http_response_status_code="200"}} {n}
# TYPE kn_serving_queue_depth gauge
kn_serving_queue_depth 2
"""
LEADER = LoopsNode("leader-0", True, (), None, None, ("http://10.0.0.1:9091/metrics",))


def _store(template: str) -> MemoryStore:
    store = MemoryStore()
    target = {"deployment_id": "t1", "node_id": "leader-0"}
    for t, values in ((-15, dict(n=0, b100=0, ms=0, s=0)), (15, dict(n=30, b100=10, ms=4200, s=4.2))):
        text = template.format(**values).encode()
        samples = adapt(parse_exposition(text, "text/plain; version=0.0.4", at(t)).samples, target)
        store.append(SampleBatch.from_samples(samples))
    return store


@pytest.mark.parametrize("template", [OPENCENSUS, OPENTELEMETRY], ids=["opencensus", "opentelemetry"])
def test_both_knative_generations_give_the_same_answer(template):
    plan = build_loops_plan("t1", (LEADER,), T0, at(30), 30, None, at(30), scrape_interval_s=15)
    m = loops_metrics(execute_loops(plan, _store(template))).model_dump(mode="json")
    # 15 s of the pair (-15, 15] lie in [0, 30): 30 x 15 / 30 = 15 requests / 30 s = 0.5 req/s
    assert m["inference_volume"] == [{"value": 0.5, "timestamp": "2026-01-01T00:00:00Z"}]
    assert m["inference_volume_by_status"] == [
        {"timestamp": "2026-01-01T00:00:00Z", "status_2xx": 0.5, "status_4xx": 0.0, "status_5xx": 0.0}
    ]
    assert m["concurrent_requests"] == [{"value": 2.0, "timestamp": "2026-01-01T00:00:00Z"}]
    (stats,) = m["response_time_stats"]
    # the point gets half of each bucket's increase, like the count: 5 <= 0.1 s, 15 <= 0.2 s (and
    # +Inf): p50 rank 7.5 -> 0.1 + 0.1 x 2.5/10 = 0.125 s; p95 rank 14.25 -> 0.1 + 0.1 x 9.25/10 =
    # 0.1925 s; p99 rank 14.85 -> 0.1 + 0.1 x 9.85/10 = 0.1985 s (the same as the whole 10, 30)
    assert (stats["p50"], stats["p95"], stats["p99"]) == pytest.approx((125.0, 192.5, 198.5))
