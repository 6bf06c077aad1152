"""Engine detection (query/engines.py): which engines each deployment's held series show, on a
MemoryStore and a real DuckDB file, and the per-model cache refreshed after DETECTION_TTL_MS on a fake
clock (issue 13 part 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servemetrics.catalog.detection import MARKERS, engines_of
from servemetrics.query.engines import DETECTION_TTL_MS, EngineCache, detect
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from servemetrics.types import Matchers
from tests.query.helpers import T0, series


def _samples() -> list[Sample]:
    return [
        *series(
            "vllm:num_requests_running", [(0, 3), (15, 4)], deployment_id="d1", source="vllm", engine="0"
        ),
        *series("vllm:num_requests_running", [(0, 1)], deployment_id="d1", source="vllm", engine="1"),
        # SGLang's tokenizer-side counter alone (a server whose scheduler metrics are not scraped)
        *series("sglang:generation_tokens_total", [(0, 10)], deployment_id="d2", source="sglang"),
        # vLLM behind Triton's frontend: both
        *series("vllm:generation_tokens_total", [(0, 5)], deployment_id="d3", source="vllm"),
        *series("nv_inference_request_success", [(0, 2)], deployment_id="d3", source="triton", model="m"),
        # platform series only: no engine
        *series("baseten_replicas_active", [(0, 2)], deployment_id="d4"),
        # a BIS-LLM-style engine (baseten_llm_* itself), another model
        *series("baseten_llm_in_flight_tokens", [(0, 6)], model_id="m2", deployment_id="e1"),
        # another model's vLLM: never m1's
        *series("vllm:num_requests_running", [(0, 1)], model_id="m2", deployment_id="e2", source="vllm"),
    ]


@pytest.fixture(params=["memory", "duckdb"])
def store(request, tmp_path: Path) -> Store:
    s: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "s.duckdb")
    s.append(SampleBatch.from_samples(_samples()))
    return s


def test_detect_names_each_deployments_engines(store):
    m1 = detect(store, "m1", T0)
    assert m1.deployments == {"d1": ("vllm",), "d2": ("sglang",), "d3": ("vllm", "triton")}
    assert m1.checked_at_ms == T0
    assert m1.engines({"d1", "d2", "d4"}) == ("vllm", "sglang")  # ENGINES order, d4 adds none
    assert m1.engines({"d4"}) == ()
    m2 = detect(store, "m2", T0)
    assert m2.deployments == {"e1": ("bis_llm",), "e2": ("vllm",)}
    assert detect(store, "nope", T0).deployments == {}


def test_which_metrics_an_engine_makes_apply():
    assert engines_of("vllm:kv_cache_usage_perc") == ("vllm",)
    assert engines_of("sglang:decode_tokens_per_second") == ("sglang",)
    assert engines_of("baseten_llm_output_tokens_total") == ("bis_llm", "vllm", "sglang")
    assert engines_of("baseten_replicas_active") == ()  # every deployment


class Counting:
    """The real store, counting its ``label_values`` calls (how much one refresh costs)."""

    def __init__(self, inner: Store) -> None:
        self.inner, self.calls = inner, 0

    def label_values(self, name: str, label: str, matchers: Matchers = ()) -> list[str]:
        self.calls += 1
        return self.inner.label_values(name, label, matchers)


def test_cache_answers_until_the_ttl_then_asks_the_store_again(store):
    counting = Counting(store)
    cache = EngineCache()
    markers = sum(len(names) for names in MARKERS.values())  # 2 + 2 + 2 + 2 = 8 lookups per refresh
    assert markers == 8
    first = cache.get(counting, "m1", T0)
    assert counting.calls == 8 and "d4" not in first.deployments
    # d4 starts exposing SGLang: not seen while the answer is younger than the TTL (2 min)
    store.append(SampleBatch.from_samples(series("sglang:num_running_reqs", [(30, 1)], deployment_id="d4")))
    assert DETECTION_TTL_MS == 120_000
    assert cache.get(counting, "m1", T0 + 119_999) is first
    assert counting.calls == 8
    fresh = cache.get(counting, "m1", T0 + 120_000)
    assert counting.calls == 16
    assert fresh.deployments["d4"] == ("sglang",) and fresh.checked_at_ms == T0 + 120_000
    # per model: m2 has its own entry
    cache.get(counting, "m2", T0 + 120_000)
    assert counting.calls == 24
    # a clock that went back (now before the answer) refreshes rather than trusting a future answer
    cache.get(counting, "m1", T0)
    assert counting.calls == 32


def test_no_bis_llm_marker_is_adapted_from_an_engine():
    """A vLLM or SGLang replica also holds ``baseten_llm_*`` series adapted from its own: none of them may
    be a BIS-LLM marker, or every engine deployment would read as BIS-LLM-style too."""
    from servemetrics.catalog.detection import MARKERS
    from servemetrics.ingest.adapters.llm import NOT_DERIVED, RULES

    adapted = {rule.target for rule in RULES}
    assert MARKERS["bis_llm"] == ("baseten_llm_in_flight_tokens", "baseten_llm_avg_in_flight_tokens")
    assert set(MARKERS["bis_llm"]) <= set(NOT_DERIVED) and not set(MARKERS["bis_llm"]) & adapted
