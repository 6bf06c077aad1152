"""The demo replica's engine metrics (vLLM and SGLang format) from one request of known token timings on a
fake clock, hand-computed bucket by bucket; the modelled prefix cache; the replica's HTTP handler feeding
them from real generation."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client import CollectorRegistry

from servemetrics.demo.engine import MAX_MODEL_LEN, Engine, PrefixCache
from servemetrics.demo.model import STOP
from servemetrics.demo.sglang_metrics import SglangMetrics
from servemetrics.demo.vllm_metrics import TOKEN_BUCKETS, VllmMetrics, buckets_1_2_5
from tests.demo.conftest import wait_engine_idle

PROMPT = "the keeper of the light came down again."  # 40 tokens (characters)
VLLM = {"model_name": "m", "engine": "0"}
SG_TOK = {"model_name": "m"}
SG_SCHED = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _one_request(engine: Engine, clock: Clock, reason: str = "length") -> None:
    """Arrive at 8 s, scheduled at 8.125, tokens at 8.25 (TTFT 0.25), 8.3125, 8.5, 8.5078125 (gaps
    0.0625, 0.1875, 0.0078125), finished at 8.5078125: binary fractions, so every difference is exact."""
    clock.t = 8.0
    req = engine.arrive(PROMPT, 4)
    clock.t = 8.125
    engine.schedule(req)
    for t in (8.25, 8.3125, 8.5, 8.5078125):
        clock.t = t
        engine.token(req)
    engine.finish(req, reason)


def _buckets(reg: CollectorRegistry, name: str, labels: dict[str, str], les: list[str]) -> list[float | None]:
    return [reg.get_sample_value(f"{name}_bucket", {**labels, "le": le}) for le in les]


def test_vllm_metrics_of_one_request():
    reg, clock = CollectorRegistry(), Clock(0.0)
    engine = Engine(clock=clock)
    VllmMetrics(reg, engine, "m")
    get = reg.get_sample_value
    clock.t = 8.0
    req = engine.arrive(PROMPT, 4)
    assert (get("vllm:num_requests_waiting", VLLM), get("vllm:num_requests_running", VLLM)) == (1, 0)
    clock.t = 8.125
    engine.schedule(req)
    assert (get("vllm:num_requests_waiting", VLLM), get("vllm:num_requests_running", VLLM)) == (0, 1)
    assert get("vllm:kv_cache_usage_perc", VLLM) == 3 / 4096  # 40 tokens: 3 blocks of 16, of 4096
    for t in (8.25, 8.3125, 8.5, 8.5078125):
        clock.t = t
        engine.token(req)
    engine.finish(req, "length")
    assert get("vllm:kv_cache_usage_perc", VLLM) == 0 and get("vllm:num_requests_running", VLLM) == 0
    # TTFT 0.25 s: in le=0.25, not in le=0.1
    assert _buckets(reg, "vllm:time_to_first_token_seconds", VLLM, ["0.1", "0.25", "+Inf"]) == [0, 1, 1]
    assert get("vllm:time_to_first_token_seconds_sum", VLLM) == 0.25
    # gaps 0.0625 (le 0.075), 0.1875 (le 0.2), 0.0078125 (le 0.01)
    les = ["0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "+Inf"]
    assert _buckets(reg, "vllm:inter_token_latency_seconds", VLLM, les) == [1, 1, 1, 2, 2, 2, 3, 3]
    assert get("vllm:inter_token_latency_seconds_sum", VLLM) == 0.2578125
    # one request: decode 0.2578125 s over 3 gaps = 0.0859375 s per output token (le 0.1)
    tpot = "vllm:request_time_per_output_token_seconds"
    assert _buckets(reg, tpot, VLLM, ["0.075", "0.1"]) == [0, 1] and get(f"{tpot}_sum", VLLM) == 0.0859375
    # e2e 0.5078125 (le 0.8), queue 0.125 and prefill 0.125 (le 0.3), inference 0.3828125 (le 0.5),
    # decode 0.2578125 (le 0.3)
    for name, le_out, le_in, total in (
        ("e2e_request_latency", "0.5", "0.8", 0.5078125),
        ("request_queue_time", None, "0.3", 0.125),
        ("request_prefill_time", None, "0.3", 0.125),
        ("request_inference_time", "0.3", "0.5", 0.3828125),
        ("request_decode_time", None, "0.3", 0.2578125),
    ):
        full = f"vllm:{name}_seconds"
        assert get(f"{full}_bucket", {**VLLM, "le": le_in}) == 1 and get(f"{full}_sum", VLLM) == total, name
        if le_out:
            assert get(f"{full}_bucket", {**VLLM, "le": le_out}) == 0, name
    assert _buckets(reg, "vllm:request_prompt_tokens", VLLM, ["20.0", "50.0"]) == [0, 1]
    assert _buckets(reg, "vllm:request_generation_tokens", VLLM, ["2.0", "5.0"]) == [0, 1]
    assert _buckets(reg, "vllm:request_params_max_tokens", VLLM, ["2.0", "5.0"]) == [0, 1]
    assert get("vllm:prompt_tokens_total", VLLM) == 40 and get("vllm:generation_tokens_total", VLLM) == 4
    reasons = [get("vllm:request_success_total", {**VLLM, "finished_reason": r}) for r in ("stop", "length")]
    assert reasons == [0, 1]
    assert (get("vllm:prefix_cache_queries_total", VLLM), get("vllm:prefix_cache_hits_total", VLLM)) == (
        40,
        0,
    )
    _one_request(engine, clock)  # the same prompt again: 39 tokens match at most, 2 whole blocks of 16
    assert (get("vllm:prefix_cache_queries_total", VLLM), get("vllm:prefix_cache_hits_total", VLLM)) == (
        80,
        32,
    )


def test_sglang_metrics_of_one_request():
    reg, clock = CollectorRegistry(), Clock(0.0)
    engine = Engine(cache_block=1, clock=clock)
    SglangMetrics(reg, engine, "m")
    get = reg.get_sample_value
    clock.t = 8.0
    req = engine.arrive(PROMPT, 4)
    assert get("sglang:num_queue_reqs", SG_SCHED) == 1
    clock.t = 8.125
    engine.schedule(req)
    assert (get("sglang:num_queue_reqs", SG_SCHED), get("sglang:num_running_reqs", SG_SCHED)) == (0, 1)
    assert _buckets(reg, "sglang:queue_time_seconds", SG_SCHED, ["0.1", "0.2"]) == [0, 1]
    for t in (8.25, 8.3125, 8.5, 8.5078125):
        clock.t = t
        engine.token(req)
    assert get("sglang:num_used_tokens", SG_SCHED) == 44  # 40 prompt + 4 generated tokens
    assert get("sglang:token_usage", SG_SCHED) == 44 / 65536
    assert get("sglang:gen_throughput", SG_SCHED) == 4 / 5  # 4 tokens in the last 5 s
    assert get("sglang:prompt_tokens_total", SG_TOK) == 0  # SGLang counts tokens when a request finishes
    engine.finish(req, "stop")
    assert _buckets(reg, "sglang:time_to_first_token_seconds", SG_TOK, ["0.2", "0.4"]) == [0, 1]
    # gaps 0.0078125 (le 0.008), 0.0625 (le 0.08), 0.1875 (le 0.2)
    les = ["0.006", "0.008", "0.06", "0.08", "0.1", "0.2"]
    assert _buckets(reg, "sglang:inter_token_latency_seconds", SG_TOK, les) == [0, 1, 1, 2, 2, 3]
    assert _buckets(reg, "sglang:e2e_request_latency_seconds", SG_TOK, ["0.4", "0.6"]) == [0, 1]
    assert get("sglang:e2e_request_latency_seconds_sum", SG_TOK) == 0.5078125
    assert (get("sglang:prompt_tokens_total", SG_TOK), get("sglang:generation_tokens_total", SG_TOK)) == (
        40,
        4,
    )
    assert (
        get("sglang:num_requests_total", SG_TOK) == 1
        and get("sglang:num_aborted_requests_total", SG_TOK) == 0
    )
    assert get("sglang:cache_hit_rate", SG_SCHED) == 0
    _one_request(engine, clock, "abort")  # same prompt: the radix cache matches 39 of its 40 tokens
    assert get("sglang:cache_hit_rate", SG_SCHED) == 39 / 40
    assert get("sglang:cached_tokens_total", SG_TOK) == 39
    assert (
        get("sglang:num_requests_total", SG_TOK) == 2
        and get("sglang:num_aborted_requests_total", SG_TOK) == 1
    )
    clock.t = 13.5078125  # 5 s after the last token: none left in the throughput window
    assert get("sglang:gen_throughput", SG_SCHED) == 0


def test_prefix_cache_blocks_lru_and_unprefilled_requests():
    cache = PrefixCache(capacity_tokens=100, block=4)
    cache.insert("a" * 60)
    assert cache.lookup("a" * 30 + "b") == 28  # 30 shared tokens, 7 whole blocks of 4
    cache.insert("b" * 50)  # 110 tokens > 100: the least recently used prompt goes
    assert cache.lookup("a" * 60) == 0 and cache.lookup("b" * 50 + "c") == 48
    engine = Engine(clock=Clock(1.0))
    req = engine.arrive(PROMPT, 4)
    engine.schedule(req)
    engine.finish(req, "abort")  # no token: never prefilled, not cached
    assert engine.prefix_cache.lookup(PROMPT) == 0
    with pytest.raises(ValueError, match="finish reason"):
        engine.finish(req, "done")


def test_vllm_1_2_5_buckets():
    assert buckets_1_2_5(100) == (1, 2, 5, 10, 20, 50, 100)
    assert TOKEN_BUCKETS[-3:] == (5000, 10000, 20000)  # up to MAX_MODEL_LEN 32768


def test_the_replica_records_what_it_streams(served):
    base, reg = served
    get = reg.get_sample_value
    text = httpx.post(f"{base}/predict", json={"prompt": "the  boat", "max_tokens": 12}, timeout=10).text
    wait_engine_idle()
    assert 1 <= len(text) <= 12
    reason = "stop" if text.endswith(STOP) else "length"
    assert len(text) == 12 or reason == "stop"
    assert get("vllm:request_success_total", {**VLLM, "finished_reason": reason}) == 1
    assert get("vllm:generation_tokens_total", VLLM) == len(text)
    assert get("vllm:inter_token_latency_seconds_count", VLLM) == len(text) - 1
    assert get("vllm:prompt_tokens_total", VLLM) == 8  # "the boat": whitespace collapsed, a token a character
    fault = httpx.post(f"{base}/predict", json={"prompt": "x", "fault": True}, timeout=10)
    wait_engine_idle()
    assert fault.status_code == 500
    assert get("vllm:request_success_total", {**VLLM, "finished_reason": "abort"}) == 1
    long = httpx.post(f"{base}/predict", content=json.dumps({"prompt": "a" * MAX_MODEL_LEN}), timeout=10)
    assert long.status_code == 400 and "context of 32768 tokens" in long.json()["error"]
    assert get("vllm:e2e_request_latency_seconds_count", VLLM) == 2  # the 400 never reached the engine
