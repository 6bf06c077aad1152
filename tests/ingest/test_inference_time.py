"""``adapters.inference_time``: the engines' inference-time histograms as ``baseten_inference_time_seconds``
(issue 16 part 2), hand-checked on exposition text. vLLM's is the real data-parallel fixture's
request-latency layout (``vllm_v1_dp_engine1_issue_excerpt.prom``, whose family shares the buckets of
``request_inference_time_seconds``: exporters.md §1 "request-latency") under the inference-time name."""

from __future__ import annotations

from servemetrics.ingest.adapters import adapt, rules_for
from servemetrics.ingest.adapters.inference_time import NOT_ADAPTED, TARGET
from servemetrics.ingest.exposition import parse_exposition
from tests.ingest.fixtures import FIXTURES, SCRAPE_MS

REPLICA = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
VLLM = "vllm:request_inference_time_seconds"


def _adapt(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = parse_exposition(text, "text/plain; version=0.0.4", SCRAPE_MS).samples
    return {(s.name, s.labels): s.value for s in adapt(samples, REPLICA)}


def _vllm_text() -> str:
    real = (FIXTURES / "vllm_v1_dp_engine1_issue_excerpt.prom").read_text()
    sum_count = (
        f'{VLLM}_sum{{engine="1",model_name="/models/qwen3-8b"}} 14.25\n'
        f'{VLLM}_count{{engine="1",model_name="/models/qwen3-8b"}} 1.0\n'
    )
    return real.replace("vllm:request_decode_time_seconds", VLLM) + sum_count


def _labels(**more: str) -> tuple[tuple[str, str], ...]:
    base = {"engine": "1", "model_name": "/models/qwen3-8b", "source": "vllm", **REPLICA}
    return tuple(sorted({**base, **more}.items()))


def test_vllm_inference_time_keeps_its_buckets_and_labels_in_seconds():
    out = _adapt(_vllm_text())
    bounds = ["15.0", "20.0", "30.0", "40.0", "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0"]
    for le in [*bounds, "7680.0", "+Inf"]:
        assert out[(f"{TARGET}_bucket", _labels(le=le))] == 1.0, le
        assert out[(f"{VLLM}_bucket", _labels(le=le))] == 1.0, le  # still stored under its own name
    assert out[(f"{TARGET}_sum", _labels())] == 14.25  # seconds: no conversion
    assert out[(f"{TARGET}_count", _labels())] == 1.0
    assert len(out) == 2 * (13 + 2)


def test_tgi_inference_duration_is_adapted_with_source_tgi():
    text = (
        "# TYPE tgi_request_inference_duration histogram\n"
        'tgi_request_inference_duration_bucket{le="0.5"} 3\n'
        'tgi_request_inference_duration_bucket{le="+Inf"} 4\n'
        "tgi_request_inference_duration_sum 2.75\n"
        "tgi_request_inference_duration_count 4\n"
    )
    labels = {"source": "tgi", **REPLICA}
    out = _adapt(text)
    assert out == {
        (f"{TARGET}_bucket", tuple(sorted({**labels, "le": "0.5"}.items()))): 3.0,
        (f"{TARGET}_bucket", tuple(sorted({**labels, "le": "+Inf"}.items()))): 4.0,
        (f"{TARGET}_sum", tuple(sorted(labels.items()))): 2.75,
        (f"{TARGET}_count", tuple(sorted(labels.items()))): 4.0,
    }


def test_triton_compute_counters_and_other_engines_are_not_adapted():
    real = (FIXTURES / "triton_trtllm_backend_readme_sample.prom").read_text()
    assert "nv_inference_compute_infer_duration_us" in real
    assert all(
        rule.target != TARGET
        for name in ("nv_inference_compute_infer_duration_us",)
        for rule in rules_for(name)
    )
    assert not any(name.startswith(TARGET) for name, _ in _adapt(real))
    assert (
        rules_for("sglang:per_stage_req_latency_seconds_bucket")[0].target
        == "sglang:per_stage_req_latency_seconds_bucket"
    )
    assert len(rules_for("sglang:per_stage_req_latency_seconds_bucket")) == 1
    assert any("Triton" in k for k in NOT_ADAPTED) and any("KServe" in k for k in NOT_ADAPTED)
