"""The engine rows as the catalog serves them (``ENGINE_ROWS``): ``catalog.engines``' rows with their
dashboard group and, for the few a user looks at first, shown by default.

Groups (``MetricDef.group``, metrics-dashboard.md "vLLM and SGLang metrics", issue 13 part 5): the
engines' own graphs (vLLM, SGLang) are the "Engine" group; the metrics derived from them (token
throughput, decode tokens/s with mean / median / p1, prefix-cache hit rate, spec-decode acceptance) are
the "LLM" group, with the ``baseten_llm_*`` rows (``catalog.llm``) first. Either group's graphs appear
only for a deployment where the engine is detected (``catalog.detection``).
"""

from __future__ import annotations

from dataclasses import replace

from servemetrics.catalog.engines import DERIVED, SGLANG, VLLM
from servemetrics.catalog.llm import LLM_ROWS
from servemetrics.catalog.model import MetricDef

ENGINE_GROUP = "Engine"
"""Dashboard group of the engines' own graphs (vLLM, SGLang)."""
LLM_GROUP = "LLM"
"""Dashboard group of the LLM graphs: token throughput and speed, cache hit rate, acceptance rate."""

SHOWN: frozenset[str] = frozenset(
    {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:output_tokens_per_second",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:num_paused_reqs",
        "sglang:num_retracted_reqs",
        "sglang:token_usage",
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:output_tokens_per_second",
    }
)
"""Engine rows shown by default (metrics-dashboard.md "Show and hide graphs": many engine graphs are
hidden by default; issue 13 part 5 names the ones shown: tokens/s (output token throughput), TTFT, time
per output token (the inter-token latency histogram, vLLM's old ``time_per_output_token_seconds``),
KV-cache usage, running / waiting requests (SGLang's requests panel: every line of it)). The rest are
listed in "Customize view"."""


def _grouped(rows: tuple[MetricDef, ...], group: str) -> tuple[MetricDef, ...]:
    return tuple(replace(m, group=group, default_visible=m.name in SHOWN) for m in rows)


ENGINE_ROWS: tuple[MetricDef, ...] = _grouped(VLLM + SGLANG, ENGINE_GROUP) + _grouped(
    LLM_ROWS + DERIVED, LLM_GROUP
)
"""Every engine and LLM row, in panel order (after the platform's rows in ``CATALOG``): the Engine group,
then the LLM group (the ``baseten_llm_*`` set of ``catalog.llm``, every graph of it hidden by default,
then the token speeds derived from the engines' own histograms)."""
