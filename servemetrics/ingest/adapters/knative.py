"""Knative Serving queue-proxy and autoscaler, both naming generations (``exporters.md`` §3).

- OpenCensus era (<= 1.18): ``revision_app_request_count`` (counter exposed without ``_total``) and
  ``revision_app_request_latencies`` (histogram in **milliseconds**: ``le`` and ``_sum`` / 1000),
  ``response_code`` -> ``status_code``; ``revision_queue_depth``; ``autoscaler_actual_pods``.
- OpenTelemetry era (1.19-1.20 ``kn_queueproxy_app_duration_seconds``, >= 1.21
  ``kn_serving_invocation_duration_seconds``): a seconds histogram whose ``_count`` is also the request
  counter, ``http_response_status_code`` -> ``status_code``; ``kn_*queue*_depth``; ``kn_revision_pods_count``.

The app-level metrics (requests that reached the user container) are used in both eras, so the
canonical series stays continuous across a Knative upgrade.
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule, histogram

_SRC = "knative"
_OC_STATUS = {"response_code": "status_code"}
_OTEL_STATUS = {"http_response_status_code": "status_code"}
_REQS = "baseten_inference_requests_total"
_E2E = "baseten_end_to_end_response_time_seconds"
_INFLIGHT = "baseten_concurrent_requests"
_ACTIVE = "baseten_replicas_active"
OC_LATENCY_BUCKETS_MS: tuple[float, ...] = (
    *(5, 10, 20, 40, 60, 80, 100, 150, 200, 250, 300, 350, 400, 450, 500),
    *(600, 700, 800, 900, 1000, 2000, 5000, 10000, 20000, 50000, 100000),
)
"""The queue-proxy's ``revision_app_request_latencies`` bounds in ms (``exporters.md`` §3.1), a fixed list
in every OpenCensus-era release; the recording rules rescale exactly these (docs/recording-rules.md)."""


def _otel_generation(name: str) -> tuple[Rule, ...]:
    return (
        *histogram(name, _E2E, _SRC, _OTEL_STATUS),
        Rule(f"{name}_count", _REQS, _SRC, _OTEL_STATUS),
    )


RULES: tuple[Rule, ...] = (
    Rule("revision_app_request_count", _REQS, _SRC, _OC_STATUS),
    Rule("revision_app_request_count_total", _REQS, _SRC, _OC_STATUS),
    *histogram(
        "revision_app_request_latencies",
        _E2E,
        _SRC,
        _OC_STATUS,
        divisor=1000.0,
        le_bounds=OC_LATENCY_BUCKETS_MS,
    ),
    Rule("revision_queue_depth", _INFLIGHT, _SRC),
    Rule("autoscaler_actual_pods", _ACTIVE, _SRC, {"revision_name": "revision"}),
    *_otel_generation("kn_queueproxy_app_duration_seconds"),
    *_otel_generation("kn_serving_invocation_duration_seconds"),
    Rule("kn_queueproxy_depth", _INFLIGHT, _SRC),
    Rule("kn_serving_queue_depth", _INFLIGHT, _SRC),
    Rule("kn_revision_pods_count", _ACTIVE, _SRC, {"kn_revision_name": "revision"}),
)
