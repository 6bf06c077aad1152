"""Request metrics of custom servers and serving stacks (``exporters.md`` §0 and §6): a replica that runs
its own HTTP server counts its requests and their latency under its stack's names; these rules map them
onto the platform's request metrics, ``baseten_inference_requests_total`` (by ``status_code``) and
``baseten_end_to_end_response_time_seconds``, each stack under its own ``source``.

- ``http``: Python HTTP instrumentation on ``prometheus_client`` (§0 naming: a counter gets ``_total``).
  prometheus-fastapi-instrumentator's ``http_requests_total`` (labels ``handler``, ``method``,
  ``status``: ``2xx`` when it groups status codes, its default) and ``http_request_duration_seconds``;
  starlette_exporter's ``starlette_requests_total`` / ``starlette_request_duration_seconds``
  (``status_code``); prometheus_flask_exporter's ``flask_http_request_total`` /
  ``flask_http_request_duration_seconds`` (``status``). A hand-written ``prometheus_client`` counter named
  ``http_requests_total`` with a ``status``, ``status_code`` or ``code`` label is read the same way.
  Every label is kept (the series of two handlers stay two series); ``status`` / ``code`` become
  ``status_code``. Requests to probe and scrape routes (``/health``, ``/healthz``, ``/readyz``, ``/livez``,
  ``/ready``, ``/ping``, ``/metrics``, by a ``handler``, ``path``, ``route`` or ``endpoint`` label) are not
  inference requests and are left out: the gateway polls ``GET /health`` every 2 s.
- ``ray_serve``: ``ray_serve_num_http_requests_total`` and ``ray_serve_http_request_latency_ms``
  (milliseconds: ``le`` and ``_sum`` / 1000), labels ``route``, ``method``, ``application``,
  ``status_code``.
- ``kserve``: the KServe Python model server has no request counter; its predict-step latency
  histogram ``request_predict_seconds`` (label ``model_name``) stands in for the end-to-end time
  (pre- and post-processing not included). Under Knative the queue-proxy's series (``knative``) count.
- ``triton``: ``nv_inference_request_success`` -> ``status_code="200"``, ``nv_inference_request_failure``
  -> ``"500"`` (§6: counters; Triton's latencies are cumulative µs counters, not histograms: no latency).
- ``tgi``: ``tgi_request_success`` -> ``status_code="200"`` (§6 lists no failure counter) and the
  ``tgi_request_duration`` histogram (seconds, e2e).

These series never add to the gateway's: per deployment and value set the query layer reads one request
source, the gateway's when it has series there (``catalog.metrics.REQUEST_SOURCES``, docs/ingest.md
"Custom servers").
"""

from __future__ import annotations

import dataclasses

from servemetrics.ingest.adapters.rules import NOT_EMPTY, LabelMatch, Rule, histogram

REQS = "baseten_inference_requests_total"
E2E = "baseten_end_to_end_response_time_seconds"
HTTP, RAY_SERVE, KSERVE, TRITON, TGI = "http", "ray_serve", "kserve", "triton", "tgi"

PROBE_ROUTES = r"(.*/)?(health|healthz|livez|readyz|ready|ping|metrics)(/.*)?"
"""Routes of health checks and scrapes (a ``handler`` / ``path`` / ``route`` / ``endpoint`` label)."""
ROUTE_LABELS = ("handler", "path", "route", "endpoint")
NOT_PROBE: tuple[LabelMatch, ...] = tuple(LabelMatch(n, PROBE_ROUTES, negate=True) for n in ROUTE_LABELS)

_ABSENT = ""
_STATUS_SPELLINGS: tuple[tuple[tuple[LabelMatch, ...], tuple[tuple[str, str], ...]], ...] = (
    ((LabelMatch("status_code", NOT_EMPTY),), ()),
    ((LabelMatch("status", NOT_EMPTY), LabelMatch("status_code", _ABSENT)), (("status", "status_code"),)),
    (
        (LabelMatch("code", NOT_EMPTY), LabelMatch("status", _ABSENT), LabelMatch("status_code", _ABSENT)),
        (("code", "status_code"),),
    ),
)
"""Which label holds the status, ``(where, rename)`` per spelling: one rule per spelling, so exactly one
applies to a series and a rename never overwrites a label."""
_NO_STATUS = (
    (LabelMatch("code", _ABSENT), LabelMatch("status", _ABSENT), LabelMatch("status_code", _ABSENT)),
    (),
)
"""A latency histogram may have no status label at all (prometheus-fastapi-instrumentator's)."""

RAY_LATENCY_BUCKETS_MS: tuple[float, ...] = (
    *(1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 1000, 2000, 5000),
    *(10000, 60000, 120000, 300000, 600000),
)
"""Ray Serve's ``DEFAULT_LATENCY_BUCKET_MS`` over its releases (older ones end at 5000), for the
recording rules' ``le`` rescaling only (ingest rescales any bound)."""


def _counter(match: str, source: str) -> tuple[Rule, ...]:
    """A request counter whose status label is spelled any of the three ways, probes left out (a counter
    without a status label adds to no status class: not mapped)."""
    return tuple(
        Rule(match, REQS, source, labels=None, where=(*NOT_PROBE, *where), rename=rename)
        for where, rename in _STATUS_SPELLINGS
    )


def _latency(
    match: str, source: str, *, divisor: float = 1.0, le_bounds: tuple[float, ...] = ()
) -> tuple[Rule, ...]:
    """A latency histogram's three rules per status spelling (or none), every label kept, probes left
    out; ``divisor`` rescales ``le`` and ``_sum`` (1000: ms -> s)."""
    return tuple(
        dataclasses.replace(r, labels=None, where=(*NOT_PROBE, *where), rename=rename)
        for where, rename in (*_STATUS_SPELLINGS, _NO_STATUS)
        for r in histogram(match, E2E, source, {}, divisor=divisor, le_bounds=le_bounds)
    )


def _status(match: str, code: str, source: str) -> tuple[Rule, ...]:
    """A counter of one outcome (Triton, TGI), exposed with or without ``_total``: ``status_code=code``."""
    return tuple(
        Rule(name, REQS, source, labels=None, constant=(("status_code", code),))
        for name in (match, match + "_total")
    )


RULES: tuple[Rule, ...] = (
    *_counter("http_requests_total", HTTP),
    *_latency("http_request_duration_seconds", HTTP),
    *_counter("starlette_requests_total", HTTP),
    *_latency("starlette_request_duration_seconds", HTTP),
    *_counter("flask_http_request_total", HTTP),
    *_latency("flask_http_request_duration_seconds", HTTP),
    *_counter("ray_serve_num_http_requests", RAY_SERVE),
    *_counter("ray_serve_num_http_requests_total", RAY_SERVE),
    *_latency(
        "ray_serve_http_request_latency_ms", RAY_SERVE, divisor=1000.0, le_bounds=RAY_LATENCY_BUCKETS_MS
    ),
    *_latency("request_predict_seconds", KSERVE),
    *_status("nv_inference_request_success", "200", TRITON),
    *_status("nv_inference_request_failure", "500", TRITON),
    *_status("tgi_request_success", "200", TGI),
    *_latency("tgi_request_duration", TGI),
)
"""The custom-server rules, in the order of the module docstring."""
