"""Custom servers' request metrics (``adapters.custom_servers``) and custom metrics (``adapters.custom``):
real ``prometheus_client`` output and the stacks' exposition, adapted with a replica's target labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from servemetrics.ingest.adapters import Adapted, adapt
from servemetrics.ingest.adapters.custom_servers import RULES
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.ingest.recording_rules import operand
from servemetrics.samples import Sample
from tests.ingest.fixtures import SCRAPE_MS

TARGET = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
REQ = "baseten_inference_requests_total"
E2E = "baseten_end_to_end_response_time_seconds"


def scrape(text: bytes, custom_limit: int = 0) -> list[Sample]:
    parsed = parse_exposition(text, "text/plain; version=0.0.4", SCRAPE_MS)
    return adapt(parsed.samples, TARGET, custom_limit)


def rows(samples: list[Sample], name: str, *keys: str) -> list[tuple[object, ...]]:
    """``(labels[k] for k in keys) + (value,)`` of the samples named ``name``, sorted."""
    return sorted((*(dict(s.labels).get(k, "") for k in keys), s.value) for s in samples if s.name == name)


def instrumentator_body() -> bytes:
    """What prometheus-fastapi-instrumentator's names look like from ``prometheus_client`` itself."""
    r = CollectorRegistry()
    reqs = Counter("http_requests", "", ["handler", "method", "status"], registry=r)
    lat = Histogram(
        "http_request_duration_seconds", "", ["handler", "method"], buckets=(0.1, 0.5), registry=r
    )
    reqs.labels("/predict", "POST", "2xx").inc(3)
    reqs.labels("/predict", "POST", "5xx").inc(1)
    reqs.labels("/v1/chat", "POST", "4xx").inc(2)
    reqs.labels("/health", "GET", "2xx").inc(40)
    reqs.labels("/metrics", "GET", "2xx").inc(9)
    for seconds in (0.05, 0.3, 0.7):
        lat.labels("/predict", "POST").observe(seconds)
    lat.labels("/health", "GET").observe(0.001)
    return generate_latest(r)


def test_instrumentator_requests_by_status_class_without_probes() -> None:
    out = scrape(instrumentator_body())
    assert rows(out, REQ, "handler", "status_code", "source") == [
        ("/predict", "2xx", "http", 3.0),
        ("/predict", "5xx", "http", 1.0),
        ("/v1/chat", "4xx", "http", 2.0),
    ]
    assert all("status" not in dict(s.labels) for s in out)
    assert rows(out, E2E + "_bucket", "handler", "le") == [
        ("/predict", "+Inf", 3.0),
        ("/predict", "0.1", 1.0),
        ("/predict", "0.5", 2.0),
    ]
    assert rows(out, E2E + "_sum", "handler") == [("/predict", 0.05 + 0.3 + 0.7)]
    assert {s.name for s in out} == {REQ, E2E + "_bucket", E2E + "_sum", E2E + "_count"}  # custom off


def test_status_spellings_of_other_python_exporters() -> None:
    body = b"""# TYPE starlette_requests_total counter
starlette_requests_total{method="POST",path="/predict",status_code="200",app_name="a"} 4
starlette_requests_total{method="GET",path="/healthz",status_code="200",app_name="a"} 8
# TYPE flask_http_request_total counter
flask_http_request_total{method="POST",status="503"} 2
# TYPE http_requests_total counter
http_requests_total{code="429",route="/predict"} 1
http_requests_total{route="/predict"} 7
"""
    out = scrape(body)
    assert rows(out, REQ, "status_code", "path", "route") == [
        ("200", "/predict", "", 4.0),
        ("429", "", "/predict", 1.0),
        ("503", "", "", 2.0),
    ]  # no status label at all: no status class, not mapped; /healthz is a probe


def test_serving_stacks() -> None:
    body = b"""# TYPE ray_serve_num_http_requests_total counter
ray_serve_num_http_requests_total{application="app",method="POST",route="/",status_code="200"} 12
ray_serve_num_http_requests_total{application="app",method="GET",route="/-/healthz",status_code="200"} 99
# TYPE ray_serve_http_request_latency_ms histogram
ray_serve_http_request_latency_ms_bucket{application="app",route="/",le="100.0"} 10
ray_serve_http_request_latency_ms_bucket{application="app",route="/",le="+Inf"} 12
ray_serve_http_request_latency_ms_sum{application="app",route="/"} 900.0
ray_serve_http_request_latency_ms_count{application="app",route="/"} 12
# TYPE request_predict_seconds histogram
request_predict_seconds_bucket{model_name="iris",le="+Inf"} 5
request_predict_seconds_sum{model_name="iris"} 0.5
request_predict_seconds_count{model_name="iris"} 5
# TYPE tgi_request_success counter
tgi_request_success 6
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="+Inf"} 6
tgi_request_duration_sum 3.0
tgi_request_duration_count 6
"""
    out = scrape(body)
    assert rows(out, REQ, "source", "status_code") == [("ray_serve", "200", 12.0), ("tgi", "200", 6.0)]
    assert rows(out, E2E + "_bucket", "source", "le") == [
        ("kserve", "+Inf", 5.0),
        ("ray_serve", "+Inf", 12.0),
        ("ray_serve", "0.1", 10.0),  # ms -> s
        ("tgi", "+Inf", 6.0),
    ]
    assert rows(out, E2E + "_sum", "source") == [("kserve", 0.5), ("ray_serve", 0.9), ("tgi", 3.0)]


def test_a_rename_compiles_to_a_label_replace_and_drops_the_old_name() -> None:
    [rule] = [
        r for r in RULES if r.match == "http_requests_total" and r.rename == (("status", "status_code"),)
    ]
    expr = operand(rule)
    assert "label_replace(http_requests_total{" in expr and '"status_code", "$1", "status", "(.*)")' in expr
    assert expr.startswith("max without (job, instance, ") and ", status) (" in expr


def custom_body() -> bytes:
    r = CollectorRegistry()
    Gauge("queue_depth", "", registry=r).set(7)
    lat = Histogram("tokenizer_seconds", "", ["kind"], buckets=(0.1,), registry=r)
    lat.labels("a").observe(0.05)
    lat.labels("b").observe(0.2)
    Gauge("baseten_private_gauge", "", registry=r).set(1)
    Gauge("servemetrics_fake", "", registry=r).set(1)
    extra = Counter("extra_series", "", ["i"], registry=r)
    for i in range(3):
        extra.labels(str(i)).inc(i + 1)
    return generate_latest(r)


def test_custom_series_kept_whole_up_to_the_limit_and_the_rest_counted() -> None:
    parsed = parse_exposition(custom_body(), "text/plain; version=0.0.4", SCRAPE_MS)
    adapted = Adapted(TARGET, custom_limit=3)
    adapted.add(parsed.samples)
    out = adapted.samples
    # queue_depth, then tokenizer_seconds{kind="a"} (its 2 buckets, _sum and _count: one series) and
    # {kind="b"}: 3; the 3 extra_series_total series are over the limit, the two reserved names dropped
    assert rows(out, "queue_depth", "source") == [("custom", 7.0)]
    assert rows(out, "tokenizer_seconds_bucket", "kind", "le") == [
        ("a", "+Inf", 1.0),
        ("a", "0.1", 1.0),
        ("b", "+Inf", 1.0),
        ("b", "0.1", 0.0),
    ]
    assert rows(out, "tokenizer_seconds_count", "kind") == [("a", 1.0), ("b", 1.0)]
    assert not [s for s in out if s.name.startswith(("extra_series", "baseten_", "servemetrics_"))]
    assert adapted.custom.dropped == {"reserved_name": 2, "series_limit": 3}
    assert all(dict(s.labels)["replica"] == "r1" for s in out)


def test_custom_metrics_off_and_under_the_limit() -> None:
    assert scrape(custom_body(), custom_limit=0) == []
    kept = scrape(custom_body(), custom_limit=1000)
    assert rows(kept, "extra_series_total", "i") == [("0", 1.0), ("1", 2.0), ("2", 3.0)]
    assert len(kept) == 1 + 2 * 4 + 3
