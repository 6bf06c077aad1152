"""The ``baseten_model_api_*`` series (metrics-dashboard.md "Model APIs metrics" and "Export Model API
metrics"; platform-facts §3 names the first three), in the gateway's own registry, so the in-process
scrape stores them and ``GET /gateway/metrics`` / ``GET /metrics`` export them like its other series.

Every series carries ``model_api``, ``team_id`` (the caller's key's team, ``""`` for a key without one)
and the serving ``model_id`` and ``deployment_id`` (the store reads a value set's deployments, and the
exports filter by the organization's models; a call refused before a deployment was chosen has
``deployment_id=""``); the per-answer ones add ``status_code``, the token counter ``token_type``
(``input_cached``, ``input_uncached``, ``output``); the request and token counters also ``api_key``, the
caller's key prefix (what ``GET /v1/model_apis/usage`` groups by). The platform does not publish the
rest of its label set (platform-facts "Gaps"); these are ours.
"""

from __future__ import annotations

from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram

from servemetrics.gateway.metrics import LATENCY_BUCKETS_S, SIZE_BUCKETS_BYTES
from servemetrics.gateway.openai_meter import Usage

API_LABELS = ("model_api", "team_id", "model_id", "deployment_id")
PREFIX = "baseten_model_api_"
TPOT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
    0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0,
)  # fmt: skip
"""Seconds per output token: 1 ms (1000 tokens/s) to 5 s, finer where decoding usually lies."""
Labels = tuple[str, ...]
TOKEN_TYPES = ("input_cached", "input_uncached", "output")


class ApiLabels(NamedTuple):
    """The label values every Model API series carries, in the order of ``API_LABELS``."""

    model_api: str
    team_id: str
    model_id: str
    deployment_id: str


class Answer(NamedTuple):
    """One answered call: status, times in seconds since arrival (``ttft_s`` None: no token came),
    body sizes in bytes, tokens and the time-per-output-token observations (seconds per token)."""

    status: int
    end_to_end_s: float
    ttft_s: float | None
    request_bytes: int
    response_bytes: int
    usage: Usage
    tpot_s: tuple[float, ...] = ()
    api_key: str = ""
    """The public prefix of the caller's key (the ``api_key`` label of the request and token counters)."""


class ModelApiMetrics:
    """The counters and histograms of the Model API calls, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r, status = registry, (*API_LABELS, "status_code")

        def counter(name: str, doc: str, labels: Labels = API_LABELS) -> Counter:
            return Counter(PREFIX + name, doc, labels, registry=r)

        def hist(
            name: str, doc: str, buckets: tuple[float, ...], labels: tuple[str, ...] = status
        ) -> Histogram:
            return Histogram(PREFIX + name, doc, labels, buckets=buckets, registry=r)

        by_key = (*API_LABELS, "api_key")
        self.requests = counter(
            "inference_requests", "Model API calls answered, by status code.", (*by_key, "status_code")
        )
        self.incoming = counter("incoming_inference_requests", "Model API calls that arrived.")
        self.rate_limited = counter("rate_limited_requests", "Calls refused for a team's rate limit.")
        self.tokens = counter("tokens", "Tokens, by type.", (*by_key, "token_type"))
        self.end_to_end = hist(
            "end_to_end_response_time_seconds",
            "Arrival to the last byte, seconds.",
            LATENCY_BUCKETS_S,
        )
        self.ttft = hist(
            "time_to_first_token_seconds",
            "Arrival to the first token chunk, s.",
            LATENCY_BUCKETS_S,
        )
        self.request_size = hist("request_size_bytes", "Request body size.", SIZE_BUCKETS_BYTES)
        self.response_size = hist("response_size_bytes", "Response body size.", SIZE_BUCKETS_BYTES)
        self.tpot = hist(
            "time_per_output_token_seconds",
            "Per output chunk after the first: seconds since the previous chunk / its new tokens.",
            TPOT_BUCKETS_S,
            API_LABELS,
        )

    def arrived(self, labels: ApiLabels) -> None:
        """Count one call arriving (before its rate limits are checked)."""
        self.incoming.labels(*labels).inc()

    def limited(self, labels: ApiLabels) -> None:
        """Count one call refused for its team's rate limit (its 429 is ``answered`` as well)."""
        self.rate_limited.labels(*labels).inc()

    def answered(self, labels: ApiLabels, answer: Answer) -> None:
        """Record one answered call (also the gateway's own 404 / 429 / 502 / 503)."""
        with_status = (*labels, str(answer.status))
        self.requests.labels(*labels, answer.api_key, str(answer.status)).inc()
        self.end_to_end.labels(*with_status).observe(answer.end_to_end_s)
        if answer.ttft_s is not None:
            self.ttft.labels(*with_status).observe(answer.ttft_s)
        self.request_size.labels(*with_status).observe(answer.request_bytes)
        self.response_size.labels(*with_status).observe(answer.response_bytes)
        u = answer.usage
        for token_type, count in zip(TOKEN_TYPES, (u.input_cached, u.input_uncached, u.output), strict=True):
            if count:
                self.tokens.labels(*labels, answer.api_key, token_type).inc(count)
        if answer.tpot_s:
            child = self.tpot.labels(*labels)
            for value in answer.tpot_s:
                child.observe(value)
