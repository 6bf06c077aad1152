"""One count of a deployment's requests (``MetricDef.request_sources``, issue 15): per deployment and value
set, the gateway's series when it has data there, else a replica-side source (Knative, a serving stack, a
custom server's own counter), never two of them added. Hand-computed over the reference store."""

from __future__ import annotations

import pytest

from servemetrics.catalog import CATALOG
from servemetrics.catalog.metrics import INFERENCE_TIME_SOURCES, REQUEST_SOURCES
from servemetrics.ingest.adapters import ADAPTERS
from servemetrics.query.series_keys import status_class
from servemetrics.query.windows import Mode
from tests.query.helpers import at, series, store_with
from tests.query.test_execute import E2E, REQ, run, values_of

INFERENCE = "baseten_inference_time_seconds"

BOTH = [(at(-86400), frozenset({"d1", "d2"}))]


def _every_15s(step: int, until: int = 105) -> list[tuple[float, float]]:
    return [(s, s // 15 * step) for s in range(0, until + 1, 15)]


def test_the_gateway_is_read_where_it_has_data_for_every_status_of_that_deployment() -> None:
    replica = {"deployment_id": "d1", "replica": "r1", "handler": "/predict"}
    store = store_with(
        # d1's server: +3 2xx and +1 5xx every 15 s, 0-105 s (its own http_requests_total)
        series(REQ, _every_15s(3), status_code="2xx", source="http", **replica),
        series(REQ, _every_15s(1), status_code="5xx", source="http", **replica),
        # the gateway meters d1 from 60 s: +2 every 15 s, all 200
        series(REQ, [(60, 0), (75, 2), (90, 4), (105, 6)], deployment_id="d1", status_code="200"),
        # d2 has no gateway series: its Ray Serve counter counts, +1 every 15 s
        series(REQ, _every_15s(1), deployment_id="d2", status_code="200", source="ray_serve"),
    )
    steps = values_of(run(store, [REQ], Mode.SERIES, 0, 120, timeline=BOTH), REQ)
    # 30 s steps. d1: 6 + 2 (server) before 60 s; the gateway's 4 and 2 after (the server's 5xx are not
    # read there either); d2: 2 per step, 1 in the last (its last sample at 105 s)
    assert steps == [[8.0, 0.0, 2.0], [8.0, 0.0, 2.0], [6.0, 0.0, 0.0], [3.0, 0.0, 0.0]]
    [summary] = values_of(run(store, [REQ], Mode.SUMMARY, 0, 120, timeline=BOTH), REQ)
    assert summary == [6.0 + 7.0, 0.0, 0.0]  # one value set: d1 gateway-metered in it, d2 by Ray Serve


def test_knative_is_read_before_a_custom_servers_own_count() -> None:
    store = store_with(
        series(REQ, _every_15s(5), deployment_id="d1", replica="r1", status_code="200", source="knative"),
        series(REQ, _every_15s(5), deployment_id="d1", replica="r1", status_code="2xx", source="http"),
    )
    [summary] = values_of(run(store, [REQ], Mode.SUMMARY, 0, 120), REQ)
    assert summary == [35.0, 0.0, 0.0]  # the same requests seen twice, counted once


def _hist(les: dict[str, float], total: float, count: float, name: str = E2E, **labels: str) -> list:
    out = []
    for le, n in les.items():
        out += series(name + "_bucket", [(0, 0), (15, n)], le=le, deployment_id="d1", **labels)
    out += series(name + "_sum", [(0, 0), (15, total)], deployment_id="d1", **labels)
    out += series(name + "_count", [(0, 0), (15, count)], deployment_id="d1", **labels)
    return out


def test_latency_from_the_gateway_alone_where_it_has_data() -> None:
    gateway = _hist({"0.1": 10, "+Inf": 10}, 0.5, 10)
    server = _hist({"1.0": 4, "+Inf": 4}, 2.0, 4, replica="r1", source="http")
    [row] = values_of(run(store_with(gateway, server), [E2E], Mode.SUMMARY, 0, 30), E2E)
    # the gateway's 10 in (0, 0.1]: p50 rank 5 -> 0.05, p99 rank 9.9 -> 0.099, avg 0.5 / 10
    assert row == pytest.approx([0.05, 0.09, 0.095, 0.099, 0.05])
    [row] = values_of(run(store_with(server), [E2E], Mode.SUMMARY, 0, 30), E2E)
    # no gateway: the server's 4 in (0, 1]: p50 rank 2 -> 0.5, avg 2 / 4
    assert row == pytest.approx([0.5, 0.9, 0.95, 0.99, 0.5])


def test_request_sources_are_the_adapters_sources_of_the_request_metrics() -> None:
    made: set[str] = set()
    for name in (REQ, E2E):
        assert CATALOG[name].request_sources == REQUEST_SOURCES
        made |= {
            r.source
            for rules in ADAPTERS.values()
            for r in rules
            if r.target.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") == name
        }
    assert made == set(REQUEST_SOURCES)  # "" = the passthrough (the gateway's own names)
    assert REQUEST_SOURCES[0] == ""  # the gateway first
    assert [m.name for m in CATALOG.values() if m.request_sources] == [REQ, E2E, INFERENCE]
    # inference time: the gateway's Server-Timing observations first, then the engines' histograms
    assert CATALOG[INFERENCE].request_sources == INFERENCE_TIME_SOURCES == ("", "vllm", "tgi")
    made = {r.source for rules in ADAPTERS.values() for r in rules if r.target.startswith(INFERENCE)}
    assert made == set(INFERENCE_TIME_SOURCES)


def test_status_classes_given_as_classes() -> None:
    assert [status_class(c) for c in ("2xx", "4XX", "5xx", "3xx", "2x", "200", "abc")] == [
        "2xx",
        "4xx",
        "5xx",
        None,
        None,
        "2xx",
        None,
    ]


def test_inference_time_from_the_gateways_server_timing_before_the_engines_histogram() -> None:
    """A replica that sends ``Server-Timing`` and is scraped as vLLM: its requests are counted once."""
    gateway = _hist({"0.1": 10, "+Inf": 10}, 0.5, 10, name=INFERENCE)
    engine = _hist({"1.0": 4, "+Inf": 4}, 2.0, 4, name=INFERENCE, replica="r1", source="vllm")
    [row] = values_of(run(store_with(gateway, engine), [INFERENCE], Mode.SUMMARY, 0, 30), INFERENCE)
    assert row == pytest.approx([0.05, 0.09, 0.095, 0.099, 0.05])  # the gateway's 10, as above
    [row] = values_of(run(store_with(engine), [INFERENCE], Mode.SUMMARY, 0, 30), INFERENCE)
    assert row == pytest.approx([0.5, 0.9, 0.95, 0.99, 0.5])  # no Server-Timing: vLLM's own
