"""The ``baseten_model_api_*`` series from the gateway's registry to an answer: exposed, parsed and
adapted as the in-process scrape does, stored, and read with the catalog's recipes; decode tokens/s is
1 / mean(time per output token), the LLM layer's rule, and tokens split by type."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from servemetrics.catalog import CATALOG
from servemetrics.gateway.model_api_metrics import Answer, ApiLabels, ModelApiMetrics
from servemetrics.gateway.openai_meter import StreamMeter, Usage
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.samples import SampleBatch
from servemetrics.store.memory import MemoryStore

T0 = 1_800_000_000_000
A = ApiLabels("chat", "team-a", "m1", "d1")


def _scrape(store: MemoryStore, registry: CollectorRegistry, ts_ms: int) -> None:
    parsed = parse_exposition(generate_latest(registry), None, ts_ms)
    store.append(SampleBatch.from_samples(adapt(parsed.samples, {})))


def _answer(names: list[str], end_ms: int) -> dict[str, list[float | None]]:
    plan = build_plan("m1", Mode.SUMMARY, T0, end_ms, names, lambda s, e: [(s, frozenset({"d1"}))], end_ms)
    result = execute(plan, STORE)
    return {d.name: list(result.rows[0].values[i]) for i, d in enumerate(result.descriptors)}


STORE = MemoryStore()


@pytest.fixture(autouse=True)
def scripted() -> None:
    """Two scrapes 15 s apart around two streams: chunks of 1, 3 and 2 tokens at 0.10, 0.16, 0.20 s (TPOT
    0.02, 0.02) and of 1 and 2 tokens at 0.5, 0.6 s (TPOT 0.05): mean 0.03 s, 33.3 tokens/s."""
    global STORE
    STORE = MemoryStore()
    registry = CollectorRegistry()
    metrics = ModelApiMetrics(registry)
    # every series at 0 in the first scrape (the scraper adds that zero for a series new to its target)
    for t in ("input_cached", "input_uncached", "output"):
        metrics.tokens.labels(*A, "", t)
    for status in ("200", "429"):
        metrics.requests.labels(*A, "", status)
    metrics.tpot.labels(*A)
    _scrape(STORE, registry, T0)
    streams = [[(1, 0.10), (4, 0.16), (6, 0.20)], [(1, 0.5), (3, 0.6)]]
    for script in streams:
        meter = StreamMeter(stream=True)
        for running, at in script:
            meter.feed(
                b'data: {"choices": [{"delta": {"content": "x"}}], "usage": {"prompt_tokens": 4, '
                b'"completion_tokens": %d, "prompt_tokens_details": {"cached_tokens": 1}}}\n\n' % running,
                at,
            )
        metrics.answered(
            A, Answer(200, 0.3, meter.first_token_s, 100, 200, meter.result(), tuple(meter.tpot_s))
        )
    metrics.answered(A, Answer(429, 0.001, None, 100, 150, Usage()))
    _scrape(STORE, registry, T0 + 15_000)


def test_decode_tokens_per_second_is_one_over_the_mean_time_per_output_token() -> None:
    got = _answer(["baseten_model_api_decode_tokens_per_second"], T0 + 15_000)
    avg, _p50, _p1 = got["baseten_model_api_decode_tokens_per_second"]
    assert avg == pytest.approx(1 / ((0.02 + 0.02 + 0.05) / 3))
    label_sets = CATALOG["baseten_model_api_decode_tokens_per_second"].label_sets
    assert label_sets[0] == {"stat": "avg"}


def test_tokens_by_type_and_requests_by_status() -> None:
    got = _answer(
        ["baseten_model_api_tokens_total", "baseten_model_api_inference_requests_total"], T0 + 15_000
    )
    assert got["baseten_model_api_tokens_total"] == [2.0, 6.0, 9.0]  # cached, uncached, output (6 + 3)
    assert got["baseten_model_api_inference_requests_total"] == [2.0, 1.0, 0.0]
