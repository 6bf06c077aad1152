"""The ``baseten_model_api_*`` rows (metrics-dashboard.md "Model APIs metrics"; platform-facts §3 names
the first three, the default set of ``GET /v1/model_apis/{name}/metrics``; issue 17).

Our gateway writes them (``gateway.model_api_metrics``; docs/model-apis.md): every series carries
``model_api`` and ``team_id``, the serving ``model_id`` and ``deployment_id``, per-answer ones a
``status_code``. Every series counts (``Scope.SERIES``): teams and deployments add up. The decode speed
is derived from the time-per-output-token histogram by the LLM layer's own rule (``catalog.llm``'s
``derived_row`` with ``Formula.INVERSE``: 1 / mean, median 1 / p50, p1 1 / p99), computed by the query
layer as for ``baseten_llm_decode_tokens_per_second``. The graphs are the dashboard's "Model APIs" group,
hidden on a model's Metrics tab (they belong to the Model API's own tab).
"""

from __future__ import annotations

from dataclasses import replace

from servemetrics.catalog.llm import derived_row
from servemetrics.catalog.model import (
    HISTOGRAM_LABEL_SETS,
    STATUS_LABEL_SETS,
    Aggregation,
    Formula,
    Kind,
    MetricDef,
    Unit,
)

MODEL_API_GROUP = "Model APIs"
"""Dashboard group of the Model API graphs."""
PREFIX = "baseten_model_api_"
TPOT = PREFIX + "time_per_output_token_seconds"
TOKEN_LABEL_SETS: tuple[dict[str, str], ...] = (
    {"token_type": "input_cached"},
    {"token_type": "input_uncached"},
    {"token_type": "output"},
)
DEFAULT_MODEL_API_METRICS: tuple[str, ...] = (
    PREFIX + "inference_requests_total",
    PREFIX + "incoming_inference_requests_total",
    PREFIX + "tokens_total",
)
"""Answered when ``GET /v1/model_apis/{name}/metrics`` names none (platform-facts §3)."""

_C, _H = Kind.COUNTER, Kind.HISTOGRAM


def _row(name: str, kind: Kind, unit: Unit, help: str, panel: str, **more: object) -> MetricDef:
    label_sets = HISTOGRAM_LABEL_SETS if kind is Kind.HISTOGRAM else ({},)
    fields = {"label_sets": label_sets, **more}
    return MetricDef(PREFIX + name, kind, unit, Aggregation.SUM, help, panel=panel, **fields)  # type: ignore[arg-type]


_ROWS: tuple[MetricDef, ...] = (
    _row(
        "inference_requests_total",
        _C,
        Unit.COUNT,
        "Model API calls answered in the step, by status class (the gateway's 429s included).",
        "Model API inference volume",
        by_label="status_code",
        label_sets=STATUS_LABEL_SETS,
    ),
    _row(
        "incoming_inference_requests_total",
        _C,
        Unit.COUNT,
        "Model API calls arrived in the step (before rate limits).",
        "Model API incoming requests",
    ),
    _row(
        "rate_limited_requests_total",
        _C,
        Unit.COUNT,
        "Model API calls refused in the step for a team's rate limit (429).",
        "Model API rate limited requests",
    ),
    _row(
        "end_to_end_response_time_seconds",
        _H,
        Unit.SECONDS,
        "Arrival to the last byte of the answer, queueing and inference included.",
        "Model API end-to-end response time",
    ),
    _row(
        "time_to_first_token_seconds",
        _H,
        Unit.SECONDS,
        "Arrival to the first chunk with output tokens (a non-streamed answer: its first byte).",
        "Model API time to first token",
    ),
    _row("request_size_bytes", _H, Unit.BYTES, "Request body size.", "Model API request size"),
    _row("response_size_bytes", _H, Unit.BYTES, "Response body size.", "Model API response size"),
    _row(
        "time_per_output_token_seconds",
        _H,
        Unit.SECONDS,
        "Per output chunk after the first: seconds since the previous chunk / its new tokens.",
        "Model API time per output token",
    ),
    derived_row(
        PREFIX + "decode_tokens_per_second",
        Unit.PER_SECOND,
        Formula.INVERSE,
        (TPOT,),
        "Decode speed of one stream: 1 / mean(time per output token); median 1 / p50; p1 = 1 / p99.",
        "Model API decode tokens per second",
    ),
    _row(
        "tokens_total",
        _C,
        Unit.COUNT,
        "Tokens in the step: input served from the prompt cache, the rest of the input, output.",
        "Model API total tokens",
        by_label="token_type",
        label_sets=TOKEN_LABEL_SETS,
    ),
)

MODEL_API_ROWS: tuple[MetricDef, ...] = tuple(replace(m, group=MODEL_API_GROUP) for m in _ROWS)
"""Every Model API row, in panel order (last in ``CATALOG``)."""
