"""Issue 13 part 1: every real vLLM / SGLang fixture through the real path (the ``Scraper`` over an
``httpx.MockTransport``, a store of each backend, ``build_plan`` / ``execute``, the API's JSON shape).

Each fixture is scraped twice: at T0 with every value 0 (a first scrape counts nothing, so the second one's
values are the increases) and at T0 + 15 s as it is. Gauges are read over [15 s, 30 s) (the fixture's
sample alone), counters and histograms over [0 s, 30 s) (the whole pair (0 s, 15 s]). Histogram values are
``[p50, p90, p95, p99, avg]``. At least one value per served metric family of the fixture; the derivation
of each is in its comment.
"""

from __future__ import annotations

import re

import pytest

from servemetrics.query.errors import UnknownMetricError
from servemetrics.query.plan import resolve_metrics
from servemetrics.store.base import Store
from tests.ingest.fixtures import FIXTURES
from tests.scrape.engine_answers import answer
from tests.scrape.test_continuity import scrape

NONE5 = [None] * 5


def _scrape_fixture(store: Store, name: str) -> None:
    text = (FIXTURES / name).read_text()
    zeros = re.sub(r"^([^#\s][^\n]*?)\s+\S+$", r"\1 0", text, flags=re.MULTILINE)
    scrape(store, [(0, zeros), (15, text)])


def gauge(store: Store, name: str) -> list[float | None] | None:
    return answer(store, name, 15, 30)


def delta(store: Store, name: str) -> list[float | None] | None:
    return answer(store, name, 0, 30)


def test_vllm_v1_docs_design_sample(store: Store) -> None:
    _scrape_fixture(store, "vllm_v1_docs_design_sample.prom")
    assert gauge(store, "vllm:num_requests_running") == [8.0]
    assert delta(store, "vllm:generation_tokens_total") == [27453.0]  # 0 -> 27453
    assert delta(store, "vllm:request_success_total") == [1.0, 131.0, 0.0]  # stop, length, abort
    # 8 buckets up to le=0.1, no +Inf bucket and no _sum in the excerpt: no quantile (PromQL needs
    # +Inf) and no avg, but the metric is served (its series exist)
    assert delta(store, "vllm:time_to_first_token_seconds") == NONE5
    assert delta(store, "vllm:output_tokens_per_second") == [pytest.approx(27453 / 30)]  # Δ / 30 s


def test_vllm_v1_0_10_engine_label_excerpt(store: Store) -> None:
    _scrape_fixture(store, "vllm_v1_0.10_engine_label_issue_excerpt.prom")
    assert gauge(store, "vllm:kv_cache_usage_perc") == [9.75010481363281e-06]
    assert delta(store, "vllm:prefix_cache_queries_total") == [32.0]  # 0 -> 32
    # exposed under the deprecated name gpu_prefix_cache_hits_total (0.9-0.11): served as the new one
    assert delta(store, "vllm:prefix_cache_hits_total") == [0.0]
    assert delta(store, "vllm:prefix_cache_hit_rate") == [0.0]  # Δhits / Δqueries = 0 / 32


def test_vllm_v1_dp_engine1_excerpt(store: Store) -> None:
    _scrape_fixture(store, "vllm_v1_dp_engine1_issue_excerpt.prom")
    # buckets le=15 ... 7680, +Inf, each 0 -> 1 (engine="1"): one request; the excerpt starts at le=15,
    # so that is the first bucket and its lower bound is 0: q quantile = 15 * q; no _sum: no avg
    p50, p90, p95, p99, avg = delta(store, "vllm:request_decode_time_seconds") or NONE5
    assert (p50, p90, p95, p99, avg) == (
        7.5,
        pytest.approx(13.5),
        pytest.approx(14.25),
        pytest.approx(14.85),
        None,
    )


def test_vllm_v0_aibrix_sample(store: Store) -> None:
    _scrape_fixture(store, "vllm_v0_aibrix_runtime_docs_sample.prom")
    assert gauge(store, "vllm:num_requests_running") == [0.0]
    assert gauge(store, "vllm:num_requests_waiting") == [0.0]
    assert gauge(store, "vllm:kv_cache_usage_perc") == [0.0]  # V0's gpu_cache_usage_perc, renamed
    assert delta(store, "vllm:num_preemptions_total") == [0.0]
    assert delta(store, "vllm:prompt_tokens_total") == [148.0]
    assert delta(store, "vllm:generation_tokens_total") == [955.0]
    assert delta(store, "vllm:request_success_total") == [4.0, 0.0, 0.0]  # stop 4; no length / abort child
    # buckets up to le=96 (CUDA-graph sizes), no +Inf, no _count: neither quantiles nor avg
    assert delta(store, "vllm:iteration_tokens_total") == NONE5
    assert delta(store, "vllm:output_tokens_per_second") == [pytest.approx(955 / 30)]
    for internal in ("vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc", "vllm:cache_config_info"):
        with pytest.raises(UnknownMetricError):  # V0-only and info series: stored, not served
            resolve_metrics([internal])


def test_sglang_docs_production_sample(store: Store) -> None:
    _scrape_fixture(store, "sglang_docs_production_metrics_sample.prom")
    assert gauge(store, "sglang:num_running_reqs") == [162.0]
    assert gauge(store, "sglang:num_queue_reqs") == [2826.0]
    assert gauge(store, "sglang:num_used_tokens") == [123859.0]
    assert gauge(store, "sglang:token_usage") == [0.28]
    assert gauge(store, "sglang:cache_hit_rate") == [0.007507552643049313]
    assert gauge(store, "sglang:gen_throughput") == [86.50814177726902]
    assert delta(store, "sglang:prompt_tokens_total") == [8128902.0]
    assert delta(store, "sglang:generation_tokens_total") == [7557572.0]
    assert delta(store, "sglang:output_tokens_per_second") == [pytest.approx(7557572 / 30)]
    # TTFT: 2513 of 11008 below le=30, the rest in +Inf: every quantile's rank (>= 5504) lies in +Inf,
    # which reads the highest finite bound 30; avg = Δsum / Δcount
    assert delta(store, "sglang:time_to_first_token_seconds") == [30.0] * 4 + [
        pytest.approx(2.3518979474117756e06 / 11008)
    ]
    # e2e: 1513 of 11228 below le=60: every quantile in +Inf -> 60
    assert delta(store, "sglang:e2e_request_latency_seconds") == [60.0] * 4 + [
        pytest.approx(3.116093850019932e06 / 11228)
    ]
    assert answer(store, "sglang:prefix_cache_hit_rate", 0, 30) is None  # no cached_tokens_total: omitted


def test_sglang_early_tpot_is_served_as_itl_with_its_speed(store: Store) -> None:
    """``sglang:time_per_output_token_seconds`` (the docs sample) is served as
    ``sglang:inter_token_latency_seconds``; count 7400757, sum 866964.579..."""
    _scrape_fixture(store, "sglang_docs_production_metrics_sample.prom")
    n = 7400757
    # p50: rank n/2 = 3700378.5 lies in (0.075, 0.1]: 433413 below, 4950195 - 433413 inside
    p50 = 0.075 + 0.025 * (n * 0.5 - 433413) / (4950195 - 433413)
    # p90, p95: ranks 6660681.3 and 7030719.15 in (0.1, 0.15]: 4950195 below, 7039435 - 4950195 inside
    p90 = 0.1 + 0.05 * (n * 0.9 - 4950195) / (7039435 - 4950195)
    p95 = 0.1 + 0.05 * (n * 0.95 - 4950195) / (7039435 - 4950195)
    # p99: rank 7326749.43 in (0.5, 0.75]: 7312226 below, 7339675 - 7312226 inside
    p99 = 0.5 + 0.25 * (n * 0.99 - 7312226) / (7339675 - 7312226)
    avg = 866964.5791549598 / n
    got = delta(store, "sglang:inter_token_latency_seconds")
    assert got == [pytest.approx(v) for v in (p50, p90, p95, p99, avg)]
    speed = delta(store, "sglang:decode_tokens_per_second")  # avg, median, p1
    assert speed == [pytest.approx(n / 866964.5791549598), pytest.approx(1 / p50), pytest.approx(1 / p99)]
    with pytest.raises(UnknownMetricError):
        resolve_metrics(["sglang:time_per_output_token_seconds"])  # one name: the new one


def test_sglang_dp_ranks_excerpt(store: Store) -> None:
    _scrape_fixture(store, "sglang_dp_ranks_issue_excerpt.prom")
    # dp_rank 4..7 and 0, 1, 2, 3, 5 (tp_rank = dp_rank: DP attention), every value 0: 0 summed
    assert gauge(store, "sglang:num_retracted_reqs") == [0.0]
    assert gauge(store, "sglang:num_paused_reqs") == [0.0]


def test_sglang_engine_type_label_excerpt(store: Store) -> None:
    _scrape_fixture(store, "sglang_engine_type_label_pr_excerpt.prom")
    assert gauge(store, "sglang:num_running_reqs") == [0.0]
    assert gauge(store, "sglang:num_used_tokens") == [0.0]
    assert gauge(store, "sglang:token_usage") == [0.0]
    assert gauge(store, "sglang:gen_throughput") == [0.0]
    # buckets le=5 ... 300, each 0 -> 1, no +Inf and no _sum / _count: no quantile, no avg
    assert delta(store, "sglang:e2e_request_latency_seconds") == NONE5
