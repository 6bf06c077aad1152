"""Issue 13 parts 1 and 3 through the real scrape path: renames stay one series (and the new name wins
when both appear, C9), data-parallel ranks add up, tensor-parallel copies count once, and the token-speed
metrics are computed from the histogram (1 / mean(TPOT), not the mean of per-chunk rates)."""

from __future__ import annotations

import pytest

from servemetrics.store.base import Store
from tests.scrape.engine_answers import answer
from tests.scrape.test_continuity import scrape

ITL_BOUNDS = ("0.01", "0.025", "0.05", "0.1", "+Inf")


def _hist(name: str, cum: tuple[float, ...], total: float, labels: str = 'engine="0"') -> str:
    """A histogram family: cumulative bucket counts per ``ITL_BOUNDS``, ``_sum`` = ``total``."""
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{labels},le="{le}"}} {c}' for le, c in zip(ITL_BOUNDS, cum, strict=True)]
    lines += [f"{name}_sum{{{labels}}} {total}", f"{name}_count{{{labels}}} {cum[-1]}"]
    return "\n".join(lines) + "\n"


def _counter(name: str, value: float, labels: str = 'engine="0"') -> str:
    return f"# TYPE {name} counter\n{name}{{{labels}}} {value}\n"


def test_prefix_cache_rename_is_one_series_and_the_new_name_wins(store: Store) -> None:
    """0 s: old name 10; 15 s: both, old 20 and new 22 (the new wins); 30 s: new 30. One series
    10 -> 22 -> 30 = 20. Summing both at 15 s would read 10 -> 42 -> 30 (a reset: 32 + 30 = 62); two
    series would read (20 - 10) + (30 - 22) = 18."""
    old, new = "vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"
    scrapes = [(0, _counter(old, 10)), (15, _counter(old, 20) + _counter(new, 22)), (30, _counter(new, 30))]
    scrape(store, scrapes)
    assert answer(store, "vllm:prefix_cache_queries_total", 0, 40) == [20.0]


def test_kv_cache_usage_rename_c9(store: Store) -> None:
    """C9: old 0.42, then both (old 0.42, new 0.40), then new 0.40: one series 0.42, 0.40, 0.40."""
    old = '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine="0"} 0.42\n'
    new = '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine="0"} 0.40\n'
    scrape(store, [(0, old), (15, old + new), (30, new)])
    assert answer(store, "vllm:kv_cache_usage_perc", 0, 15) == [0.42]
    assert answer(store, "vllm:kv_cache_usage_perc", 15, 30) == [0.40]  # never 0.82, never a mean 0.41
    assert answer(store, "vllm:kv_cache_usage_perc", 0, 45) == [pytest.approx((0.42 + 0.40 + 0.40) / 3)]


def test_tpot_rename_to_itl_is_one_histogram(store: Store) -> None:
    """vLLM 0.11: ``time_per_output_token_seconds`` -> ``inter_token_latency_seconds``. Scrapes: 0 s old
    (all 0); 15 s old (count 4, sum 0.4); 30 s both, old (7, 0.7) and new (8, 0.5); 45 s new (10, 1.0).
    One series 0, 4, 8 (the new name wins at 30 s), 10:
    - [0 s, 15 s): the old name's pair, served under the new name: avg 0.4 / 4 = 0.1;
    - [15 s, 30 s): Δcount 8 - 4 = 4, Δsum 0.5 - 0.4 = 0.1: avg 0.025 (both names summed: 0.8 / 11;
      the old name winning: 0.3 / 3 = 0.1);
    - the whole window: Δcount 10, Δsum 1.0, avg 0.1; buckets Δ le=0.025: 0, 0.05: 8, 0.1: 8, +Inf: 10,
      p50 rank 5 in (0.025, 0.05]: 0.025 + 0.025 * 5 / 8; decode speed 1 / 0.1 = 10 tokens/s."""
    old, new = "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"
    scrapes = [
        (0, _hist(old, (0, 0, 0, 0, 0), 0)),
        (15, _hist(old, (0, 0, 4, 4, 4), 0.4)),
        (30, _hist(old, (0, 0, 7, 7, 7), 0.7) + _hist(new, (0, 0, 8, 8, 8), 0.5)),
        (45, _hist(new, (0, 0, 8, 8, 10), 1.0)),
    ]
    scrape(store, scrapes)
    first = answer(store, new, 0, 15)
    second = answer(store, new, 15, 30)
    assert first is not None and first[4] == pytest.approx(0.1)
    assert second is not None and second[4] == pytest.approx(0.025)
    got = answer(store, new, 0, 60)
    assert got is not None
    assert got[0] == pytest.approx(0.025 + 0.025 * 5 / 8)
    assert got[4] == pytest.approx(0.1)
    assert answer(store, "vllm:decode_tokens_per_second", 0, 60) == [pytest.approx(10.0), *got_speed(got)]


def got_speed(itl: list[float | None]) -> list[object]:
    """The median and p1 speeds of an ITL answer: 1 / p50, 1 / p99."""
    assert itl[0] is not None and itl[3] is not None
    return [pytest.approx(1 / itl[0]), pytest.approx(1 / itl[3])]


def test_vllm_data_parallel_engines_add_up(store: Store) -> None:
    """engine 0 and 1 (two DP ranks): running 3 + 5 = 8; tokens 100 + 50 = 150; KV usage a mean over
    engines (0.2 + 0.6) / 2 = 0.4."""

    def body(running: tuple[int, int], tokens: tuple[int, int]) -> str:
        out = "# TYPE vllm:num_requests_running gauge\n# TYPE vllm:kv_cache_usage_perc gauge\n"
        for e in (0, 1):
            out += f'vllm:num_requests_running{{engine="{e}"}} {running[e]}\n'
            out += f'vllm:kv_cache_usage_perc{{engine="{e}"}} {0.2 + 0.4 * e}\n'
        out += "# TYPE vllm:generation_tokens_total counter\n"
        return out + "".join(f'vllm:generation_tokens_total{{engine="{e}"}} {tokens[e]}\n' for e in (0, 1))

    scrape(store, [(0, body((0, 0), (0, 0))), (15, body((3, 5), (100, 50)))])
    assert answer(store, "vllm:num_requests_running", 15, 30) == [8.0]
    assert answer(store, "vllm:kv_cache_usage_perc", 15, 30) == [pytest.approx(0.4)]
    assert answer(store, "vllm:generation_tokens_total", 0, 30) == [150.0]
    assert answer(store, "vllm:output_tokens_per_second", 0, 30) == [pytest.approx(150 / 30)]


def _sglang(name: str, kind: str, ranks: list[tuple[int, int, float]]) -> str:
    """One SGLang scheduler family: ``(dp_rank, tp_rank, value)`` per series."""
    lines = [f"# TYPE {name} {kind}"]
    for dp, tp, v in ranks:
        lines.append(f'{name}{{dp_rank="{dp}",tp_rank="{tp}",pp_rank="0",engine_type="unified"}} {v}')
    return "\n".join(lines) + "\n"


def test_sglang_tensor_parallel_copies_count_once(store: Store) -> None:
    """dp_rank 0 reported by tp_rank 0, 1, 2 (copies), dp_rank 1 by tp_rank 3.
    Running: dp0 4 (three copies), dp1 6 -> 4 + 6 = 10, not 18.
    Token usage (mean): dp0 0.5, dp1 0.2 -> (0.5 + 0.2) / 2 = 0.35 per rank, not (3 * 0.5 + 0.2) / 4.
    Retracted requests (counter): dp0 0 -> 6 in each copy, dp1 0 -> 4: 6 + 4 = 10, not 22."""

    def body(running: tuple[float, float], usage: tuple[float, float], retracted: tuple[float, float]) -> str:
        def per_rank(v: tuple[float, float]) -> list[tuple[int, int, float]]:
            return [(0, 0, v[0]), (0, 1, v[0]), (0, 2, v[0]), (1, 3, v[1])]

        return (
            _sglang("sglang:num_running_reqs", "gauge", per_rank(running))
            + _sglang("sglang:token_usage", "gauge", per_rank(usage))
            + _sglang("sglang:num_retracted_requests_total", "counter", per_rank(retracted))
        )

    scrape(store, [(0, body((0, 0), (0, 0), (0, 0))), (15, body((4, 6), (0.5, 0.2), (6, 4)))])
    assert answer(store, "sglang:num_running_reqs", 15, 30) == [10.0]
    assert answer(store, "sglang:token_usage", 15, 30) == [pytest.approx(0.35)]
    assert answer(store, "sglang:num_retracted_requests_total", 0, 30) == [10.0]


def test_decode_speed_from_a_small_tpot_histogram(store: Store) -> None:
    """Ten chunks: 2 at 0.008 s/token, 4 at 0.02, 3 at 0.04, 1 at 0.09 (buckets 0.01, 0.025, 0.05, 0.1):
    cumulative 2, 6, 9, 10, 10; sum 0.016 + 0.08 + 0.12 + 0.09 = 0.306.
    - mean speed = 1 / mean(TPOT) = Δcount / Δsum = 10 / 0.306 = 32.68 tokens/s;
    - median = 1 / p50: rank 5 in (0.01, 0.025] (2 below, 4 inside): 0.01 + 0.015 * 3 / 4 = 0.02125,
      1 / 0.02125 = 47.06;
    - p1 = 1 / p99: rank 9.9 in (0.05, 0.1] (9 below, 1 inside): 0.05 + 0.05 * 0.9 = 0.095 -> 10.53.
    The mean of the per-chunk rates, (2 * 125 + 4 * 50 + 3 * 25 + 1 / 0.09) / 10 = 53.61, is not it."""
    name = "vllm:inter_token_latency_seconds"
    scrape(store, [(0, _hist(name, (0, 0, 0, 0, 0), 0)), (15, _hist(name, (2, 6, 9, 10, 10), 0.306))])
    speed = answer(store, "vllm:decode_tokens_per_second", 0, 30)
    assert speed == [pytest.approx(10 / 0.306), pytest.approx(1 / 0.02125), pytest.approx(1 / 0.095)]
    per_chunk_mean = (2 * 125 + 4 * 50 + 3 * 25 + 1 / 0.09) / 10
    assert speed[0] != pytest.approx(per_chunk_mean)
    assert per_chunk_mean == pytest.approx(53.61, abs=0.01) and 10 / 0.306 == pytest.approx(32.68, abs=0.01)


def test_cache_hit_rate_and_spec_decode_ratios(store: Store) -> None:
    """vLLM: hits 0 -> 50 of queries 0 -> 200: 0.25. Spec decode: drafts 0 -> 10, draft tokens 0 -> 30,
    accepted 0 -> 18: acceptance rate 18 / 30 = 0.6, mean acceptance length 1 + 18 / 10 = 2.8.
    SGLang: cached 0 -> 30 of prompt tokens 0 -> 120: 0.25."""
    names = (
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    )

    def body(values: tuple[float, ...]) -> str:
        out = "".join(_counter(n, v) for n, v in zip(names, values[:5], strict=True))
        out += _counter("sglang:cached_tokens_total", values[5], 'model_name="m"')
        return out + _counter("sglang:prompt_tokens_total", values[6], 'model_name="m"')

    scrape(store, [(0, body((0,) * 7)), (15, body((50, 200, 10, 30, 18, 30, 120)))])
    assert answer(store, "vllm:prefix_cache_hit_rate", 0, 30) == [0.25]
    assert answer(store, "vllm:spec_decode_acceptance_rate", 0, 30) == [pytest.approx(0.6)]
    assert answer(store, "vllm:spec_decode_mean_acceptance_length", 0, 30) == [pytest.approx(2.8)]
    assert answer(store, "sglang:prefix_cache_hit_rate", 0, 30) == [0.25]
    # no increase of the denominator in a value set: null, not 0 or inf
    assert answer(store, "vllm:prefix_cache_hit_rate", 20, 30) == [None]
