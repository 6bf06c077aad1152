"""Issue 13 part 2: the ``baseten_llm_*`` set through the real path (the ``Scraper`` over an
``httpx.MockTransport``, each local store, ``build_plan`` / ``execute``, the API's JSON shape).

Every vLLM / SGLang fixture maps to hand-checked ``baseten_llm_*`` values (scraped at T0 with every value 0
and at T0 + 15 s as it is, read over [0 s, 30 s), as ``test_engine_fixtures``); native ``baseten_llm_*``
series pass through (also in the export's ``_bucket_total`` spelling); a replica's native series wins over
its engine's adapted one; histograms of different bucket layouts (a vLLM and an SGLang replica) combine
into the quantiles of all their observations. Histogram values are ``[p50, p90, p95, p99, avg]``.
"""

from __future__ import annotations

import pytest

from servemetrics.ingest.scraper import Target
from servemetrics.store.base import Store
from servemetrics.types import labels_of
from tests.scrape.engine_answers import answer
from tests.scrape.test_continuity import REPLICA, STABLE, scrape
from tests.scrape.test_engine_fixtures import NONE5, _scrape_fixture

IN, OUT = "baseten_llm_input_tokens_total", "baseten_llm_output_tokens_total"
TTFT, TPOT = "baseten_llm_time_to_first_token_seconds", "baseten_llm_time_per_output_token_seconds"
R2 = Target("http://10.0.0.8:8000/metrics", labels_of({**REPLICA, "replica": "r2"}))


REQS = "baseten_llm_num_requests"


def delta(store: Store, name: str) -> list[float | None] | None:
    return answer(store, name, 0, 30)


def gauge(store: Store, name: str) -> list[float | None] | None:
    return answer(store, name, 15, 30)  # the fixture's own sample alone


def test_vllm_v1_docs_design_sample(store: Store) -> None:
    _scrape_fixture(store, "vllm_v1_docs_design_sample.prom")
    assert delta(store, OUT) == [27453.0]  # vllm:generation_tokens_total 0 -> 27453
    assert delta(store, "baseten_llm_output_tokens_per_second") == [pytest.approx(27453 / 30)]
    # vllm:time_to_first_token_seconds: 8 buckets up to le=0.1, no +Inf and no _sum: served, no value
    assert delta(store, TTFT) == NONE5
    assert delta(store, IN) is None  # no prompt tokens in the excerpt: omitted
    assert delta(store, "vllm:generation_tokens_total") == [27453.0]  # still served as itself
    assert gauge(store, REQS) == [8.0]  # vllm:num_requests_running 8, no waiting gauge in the excerpt


def test_vllm_v0_aibrix_sample(store: Store) -> None:
    _scrape_fixture(store, "vllm_v0_aibrix_runtime_docs_sample.prom")
    assert delta(store, IN) == [148.0]  # vllm:prompt_tokens_total
    assert delta(store, OUT) == [955.0]  # vllm:generation_tokens_total
    assert delta(store, "baseten_llm_input_tokens_per_second") == [pytest.approx(148 / 30)]
    assert gauge(store, REQS) == [0.0]  # running 0 + waiting 0
    for name in (TTFT, TPOT, "baseten_llm_in_flight_tokens"):
        assert delta(store, name) is None  # not in V0's excerpt / no engine source: omitted


def test_sglang_engine_type_excerpt_running_requests(store: Store) -> None:
    _scrape_fixture(store, "sglang_engine_type_label_pr_excerpt.prom")
    assert gauge(store, REQS) == [0.0]  # num_running_reqs 0 (engine_type="unified"), no queue gauge


def test_num_requests_adds_running_and_waiting_dp_ranks_and_counts_tp_copies_once(store: Store) -> None:
    """vLLM engines 0 / 1 (data-parallel): running 3 + 4, waiting 1 + 2 = 10. SGLang on r2: tp_rank 0 and
    1 repeat running 5 and queued 2 (one rank: 7, not 14); dp_rank 1 (tp_rank 2) has running 1: 8."""
    vllm = "# TYPE vllm:num_requests_running gauge\n# TYPE vllm:num_requests_waiting gauge\n" + "".join(
        f'vllm:num_requests_{kind}{{engine="{e}",model_name="m"}} {v}\n'
        for kind, e, v in (("running", 0, 3), ("running", 1, 4), ("waiting", 0, 1), ("waiting", 1, 2))
    )
    ranks = [("0", "0", 5, 2), ("0", "1", 5, 2), ("1", "2", 1, 0)]
    sglang = "# TYPE sglang:num_running_reqs gauge\n# TYPE sglang:num_queue_reqs gauge\n" + "".join(
        f'sglang:num_{kind}{{dp_rank="{dp}",model_name="m",pp_rank="0",tp_rank="{tp}"}} {v}\n'
        for dp, tp, running, queued in ranks
        for kind, v in (("running_reqs", running), ("queue_reqs", queued))
    )
    scrape(store, [(15, vllm), (15, sglang)], [STABLE, R2])
    assert gauge(store, REQS) == [10.0 + 8.0]


@pytest.mark.parametrize(
    "fixture",
    [
        "vllm_v1_0.10_engine_label_issue_excerpt.prom",  # cache usage and prefix-cache counters only
        "vllm_v1_dp_engine1_issue_excerpt.prom",  # request_decode_time_seconds only
        "sglang_dp_ranks_issue_excerpt.prom",  # retracted / paused gauges only
        "sglang_engine_type_label_pr_excerpt.prom",  # scheduler gauges and e2e latency only
    ],
)
def test_fixtures_without_llm_families_serve_none(store: Store, fixture: str) -> None:
    _scrape_fixture(store, fixture)
    for name in (IN, OUT, TTFT, TPOT, "baseten_llm_input_tokens_per_request"):
        assert delta(store, name) is None


def test_sglang_docs_production_sample(store: Store) -> None:
    _scrape_fixture(store, "sglang_docs_production_metrics_sample.prom")
    assert delta(store, IN) == [8128902.0]  # sglang:prompt_tokens_total
    assert delta(store, OUT) == [7557572.0]  # sglang:generation_tokens_total
    assert gauge(store, REQS) == [162.0 + 2826.0]  # num_running_reqs + num_queue_reqs
    # TTFT: 2513 of 11008 below le=30, the rest in +Inf: every quantile reads the highest finite bound 30
    assert delta(store, TTFT) == [30.0] * 4 + [pytest.approx(2.3518979474117756e06 / 11008)]
    # TPOT from the early sglang:time_per_output_token_seconds (as test_engine_fixtures' ITL): count n,
    # p50 in (0.075, 0.1] with 433413 below and 4950195 - 433413 inside, p99 in (0.5, 0.75]
    n = 7400757
    p50 = 0.075 + 0.025 * (n * 0.5 - 433413) / (4950195 - 433413)
    p99 = 0.5 + 0.25 * (n * 0.99 - 7312226) / (7339675 - 7312226)
    got = delta(store, TPOT) or NONE5
    assert (got[0], got[3], got[4]) == (
        pytest.approx(p50),
        pytest.approx(p99),
        pytest.approx(866964.5791549598 / n),
    )
    speed = delta(store, "baseten_llm_decode_tokens_per_second")  # 1 / mean, 1 / p50, 1 / p99
    assert speed == [pytest.approx(n / 866964.5791549598), pytest.approx(1 / p50), pytest.approx(1 / p99)]


NATIVE = """# TYPE baseten_llm_output_tokens_total counter
baseten_llm_output_tokens_total{{pod_hash="a1"}} {out}
# TYPE baseten_llm_in_flight_tokens gauge
baseten_llm_in_flight_tokens{{pod_hash="a1"}} {flight}
# TYPE baseten_llm_time_per_output_token_seconds_bucket_total counter
baseten_llm_time_per_output_token_seconds_bucket_total{{le="0.01",pod_hash="a1"}} {b1}
baseten_llm_time_per_output_token_seconds_bucket_total{{le="0.05",pod_hash="a1"}} {b2}
baseten_llm_time_per_output_token_seconds_bucket_total{{le="+Inf",pod_hash="a1"}} {b2}
# TYPE baseten_llm_time_per_output_token_seconds_sum_total counter
baseten_llm_time_per_output_token_seconds_sum_total{{pod_hash="a1"}} {s}
# TYPE baseten_llm_time_per_output_token_seconds_count_total counter
baseten_llm_time_per_output_token_seconds_count_total{{pod_hash="a1"}} {b2}
"""


def _native(out: float, flight: float, b1: float, b2: float, s: float) -> str:
    return NATIVE.format(out=out, flight=flight, b1=b1, b2=b2, s=s)


def test_native_series_pass_through_in_the_export_spelling(store: Store) -> None:
    scrape(store, [(0, _native(0, 0, 0, 0, 0)), (15, _native(500, 1200, 10, 40, 0.9))])
    assert delta(store, OUT) == [500.0]
    assert answer(store, "baseten_llm_in_flight_tokens", 15, 30) == [1200.0]
    # 10 of 40 chunks <= 0.01 s, 30 in (0.01, 0.05]: p50 rank 20 -> 0.01 + 0.04 * 10/30; p90 rank 36
    # -> 0.01 + 0.04 * 26/30; p95 38 -> 0.01 + 0.04 * 28/30; p99 39.6 -> 0.01 + 0.04 * 29.6/30; avg 0.9/40
    expect = [0.01 + 0.04 * k / 30 for k in (10, 26, 28, 29.6)] + [0.9 / 40]
    assert delta(store, TPOT) == [pytest.approx(v) for v in expect]
    assert delta(store, "baseten_llm_decode_tokens_per_second") == [
        pytest.approx(40 / 0.9),
        pytest.approx(1 / expect[0]),
        pytest.approx(1 / expect[3]),
    ]


VLLM = """# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {e0}
vllm:generation_tokens_total{{engine="1",model_name="m"}} {e1}
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.01",model_name="m"}} {i1}
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {i2}
vllm:inter_token_latency_seconds_sum{{engine="0",model_name="m"}} {isum}
vllm:inter_token_latency_seconds_count{{engine="0",model_name="m"}} {i2}
"""


def _vllm(e0: float, e1: float, i1: float = 0, i2: float = 0, isum: float = 0) -> str:
    return VLLM.format(e0=e0, e1=e1, i1=i1, i2=i2, isum=isum)


def test_native_wins_over_the_engine_on_one_replica(store: Store) -> None:
    """r1 exposes both names (its native 500 tokens, its vLLM engines 300 + 400): the native series alone;
    r2 exposes only vLLM (engines 10 + 20): its engines, summed (DP ranks). 500 + 30, never 1230."""
    both = [_native(0, 0, 0, 0, 0) + _vllm(0, 0), _native(500, 7, 10, 40, 0.9) + _vllm(300, 400, 99, 99, 9)]
    engine_only = [_vllm(0, 0), _vllm(10, 20, 3, 4, 0.02)]
    scrape(store, [(0, both[0]), (0, engine_only[0]), (15, both[1]), (15, engine_only[1])], [STABLE, R2] * 2)
    assert delta(store, OUT) == [530.0]
    assert delta(store, "vllm:generation_tokens_total") == [730.0]  # the engine's own metric: all of it
    # TPOT: r1's native 40 chunks (10 <= 0.01 s) and r2's vLLM 4 (3 <= 0.01 s); r1's vLLM 99 never count.
    # One layout per view, different: r2 (0.01, +Inf) read at 0.05 stays 3 (beyond its finite bounds);
    # union 0.01: 13, 0.05: 10 + 30 + 3 = 43, +Inf: 44. p50 rank 22 in (0.01, 0.05]: 0.01 + 0.04 * 9/30
    got = delta(store, TPOT) or NONE5
    assert got[0] == pytest.approx(0.01 + 0.04 * 9 / 30)
    assert got[4] == pytest.approx((0.9 + 0.02) / 44)  # Δsum / Δcount of the chosen views only


def test_native_counts_where_it_has_data_engine_before(store: Store) -> None:
    """A replica whose native series appears later (at 45 s, its creation zero 1 ms after the 30 s scrape):
    the engine's series counts in the value sets before, the native one from then on (never both)."""
    scrapes = [(0, _vllm(0, 0)), (15, _vllm(100, 0)), (30, _vllm(150, 0))]
    scrapes += [(45, _vllm(170, 0) + _native(0, 0, 0, 0, 0)), (60, _vllm(200, 0) + _native(60, 0, 0, 0, 0))]
    scrape(store, scrapes)
    assert answer(store, OUT, 0, 30) == [150.0]  # (0, 15] +100, (15, 30] +50 from vLLM alone
    assert answer(store, OUT, 30, 60) == [60.0]  # native (45, 60] +60; vLLM's +20 +30 are not added


TTFT_VLLM = """# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {a}
vllm:time_to_first_token_seconds_bucket{{le="0.2",model_name="m"}} {b}
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {b}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} {s}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {b}
"""
TTFT_SGLANG = """# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{le="0.15",model_name="m"}} {a}
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {a}
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {s}
sglang:time_to_first_token_seconds_count{{model_name="m"}} {a}
"""


def test_quantiles_across_bucket_layouts_are_those_of_all_observations(store: Store) -> None:
    """r1 (vLLM layout 0.1, 0.2): 2 requests <= 0.1 s, 2 in (0.1, 0.2]; r2 (SGLang layout 0.15): 2 <= 0.15 s.

    Each view read at the union of bounds, linear inside its buckets: 0.1 -> 2 + 2 * 0.1/0.15 = 3.333,
    0.15 -> (2 + 2 * 0.5) + 2 = 5, 0.2 -> 4 + 2 = 6, +Inf 6. p50 rank 3 in (0, 0.1]: 0.1 * 3 / 3.333 = 0.09,
    the median of the mixture itself (at 0.09 r1 has 1.8 below, r2 1.2: 3 of 6). A per-le sum (0.1: 2,
    0.15: 2, 0.2: 4, +Inf: 6) would read 0.15 + 0.05 * (3 - 2) / 2 = 0.175, silently wrong.
    p90 rank 5.4, p95 5.7, p99 5.94 in (0.15, 0.2] (5 below, 1 inside). avg (0.5 + 0.2) / 6."""
    r1 = [TTFT_VLLM.format(a=0, b=0, s=0), TTFT_VLLM.format(a=2, b=4, s=0.5)]
    r2 = [TTFT_SGLANG.format(a=0, s=0), TTFT_SGLANG.format(a=2, s=0.2)]
    scrape(store, [(0, r1[0]), (0, r2[0]), (15, r1[1]), (15, r2[1])], [STABLE, R2] * 2)
    expect = [0.09, 0.15 + 0.05 * 0.4, 0.15 + 0.05 * 0.7, 0.15 + 0.05 * 0.94, 0.7 / 6]
    assert delta(store, TTFT) == [pytest.approx(v) for v in expect]
    # the engines' own metrics are one layout each: unchanged (r1 alone: p50 rank 2 -> 0.1)
    assert (delta(store, "vllm:time_to_first_token_seconds") or NONE5)[0] == pytest.approx(0.1)
