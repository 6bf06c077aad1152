"""Engine-native metrics (vLLM ``vllm:*``, SGLang ``sglang:*``; exporters.md §1, §2) and the metrics
derived from them (LLM token speed, cache hit rate, speculative decoding; metrics-dashboard.md).

Served under the engines' own names, as stored (``ingest.adapters.engines``: a renamed metric is stored
under its newest name, ``ALIASES``). The dashboard groups, and the few graphs shown by default, are set
on these rows by ``catalog.engine_rows``.
Ranks (``Ranks``): vLLM's ``engine`` label is a data-parallel engine core (its own requests: summed);
SGLang's scheduler metrics carry ``dp_rank`` (summed) and ``tp_rank`` / ``pp_rank``, whose ranks repeat
one value (counted once). SGLang's tokenizer-side metrics (tokens, requests, latency histograms) carry
only ``model_name``.
"""

from __future__ import annotations

from servemetrics.catalog.model import (
    HISTOGRAM_LABEL_SETS,
    PLAIN_LABEL_SETS,
    SPEED_LABEL_SETS,
    Aggregation,
    Derived,
    Formula,
    Kind,
    MetricDef,
    Ranks,
    Unit,
)

_SUM, _MEAN = Aggregation.SUM, Aggregation.MEAN
VLLM_RANKS = Ranks(parallel=("engine",))
"""vLLM V1: one series per engine core (``engine`` = data-parallel rank); TP workers do not report."""
SGLANG_RANKS = Ranks(parallel=("dp_rank",), copies=("tp_rank", "pp_rank"))
"""SGLang scheduler metrics: data-parallel ranks add up, tensor / pipeline ranks repeat one value."""
_FINISHED = ({"finished_reason": "stop"}, {"finished_reason": "length"}, {"finished_reason": "abort"})


def _row(
    name: str,
    kind: Kind,
    unit: Unit,
    agg: Aggregation,
    help: str,
    panel: str,
    legend: str = "",
    ranks: Ranks = VLLM_RANKS,
) -> MetricDef:
    label_sets = HISTOGRAM_LABEL_SETS if kind is Kind.HISTOGRAM else PLAIN_LABEL_SETS
    return MetricDef(
        name, kind, unit, agg, help, label_sets=label_sets, panel=panel, legend=legend, ranks=ranks
    )


def _derived(
    name: str, unit: Unit, formula: Formula, inputs: tuple[str, ...], help: str, panel: str
) -> MetricDef:
    label_sets = SPEED_LABEL_SETS if formula is Formula.INVERSE else PLAIN_LABEL_SETS
    derived = Derived(formula, inputs)
    return MetricDef(name, Kind.GAUGE, unit, _SUM, help, label_sets=label_sets, panel=panel, derived=derived)


_G, _C, _H = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM
_N, _S, _R, _PS = Unit.COUNT, Unit.SECONDS, Unit.RATIO, Unit.PER_SECOND

VLLM: tuple[MetricDef, ...] = (
    _row(
        "vllm:num_requests_running",
        _G,
        _N,
        _SUM,
        "Requests in model execution batches.",
        "vLLM requests",
        "Running",
    ),
    _row(
        "vllm:num_requests_waiting",
        _G,
        _N,
        _SUM,
        "Requests waiting to be scheduled.",
        "vLLM requests",
        "Waiting",
    ),
    _row(
        "vllm:kv_cache_usage_perc",
        _G,
        _R,
        _MEAN,
        "KV-cache block usage (0-1), mean across engines (old name vllm:gpu_cache_usage_perc).",
        "vLLM KV-cache usage",
    ),
    _row(
        "vllm:prefix_cache_queries_total",
        _C,
        _N,
        _SUM,
        "Tokens looked up in the prefix cache (blocks from engines ≈0.8: old name gpu_prefix_cache_queries).",
        "vLLM prefix cache",
        "Queries",
    ),
    _row(
        "vllm:prefix_cache_hits_total",
        _C,
        _N,
        _SUM,
        "Tokens found in the prefix cache (blocks from engines ≈0.8: old name gpu_prefix_cache_hits).",
        "vLLM prefix cache",
        "Hits",
    ),
    _row("vllm:prompt_tokens_total", _C, _N, _SUM, "Prefill tokens processed.", "vLLM tokens", "Prompt"),
    _row("vllm:generation_tokens_total", _C, _N, _SUM, "Generated tokens.", "vLLM tokens", "Generation"),
    MetricDef(
        "vllm:request_success_total",
        _C,
        _N,
        _SUM,
        "Finished requests by finish reason (stop / length / abort).",
        by_label="finished_reason",
        label_sets=_FINISHED,
        panel="vLLM finished requests",
        ranks=VLLM_RANKS,
    ),
    _row("vllm:num_preemptions_total", _C, _N, _SUM, "Preemptions (recompute).", "vLLM preemptions"),
    _row("vllm:time_to_first_token_seconds", _H, _S, _SUM, "Time to first token, in seconds.", "vLLM TTFT"),
    _row(
        "vllm:inter_token_latency_seconds",
        _H,
        _S,
        _SUM,
        "Gap between successive token outputs, in seconds (old name time_per_output_token_seconds).",
        "vLLM inter-token latency",
    ),
    _row(
        "vllm:request_time_per_output_token_seconds",
        _H,
        _S,
        _SUM,
        "Per-request mean time per output token, in seconds (one observation per finished request).",
        "vLLM request time per output token",
    ),
    _row(
        "vllm:e2e_request_latency_seconds",
        _H,
        _S,
        _SUM,
        "Arrival to last token, in seconds.",
        "vLLM e2e latency",
    ),
    _row(
        "vllm:request_queue_time_seconds",
        _H,
        _S,
        _SUM,
        "Time waiting to be scheduled, in seconds.",
        "vLLM queue time",
    ),
    _row(
        "vllm:request_prefill_time_seconds",
        _H,
        _S,
        _SUM,
        "Scheduled to first token, in seconds.",
        "vLLM prefill time",
    ),
    _row(
        "vllm:request_decode_time_seconds",
        _H,
        _S,
        _SUM,
        "First to last token, in seconds.",
        "vLLM decode time",
    ),
    _row(
        "vllm:request_inference_time_seconds",
        _H,
        _S,
        _SUM,
        "Scheduled to last token, in seconds.",
        "vLLM inference time",
    ),
    _row(
        "vllm:request_prompt_tokens",
        _H,
        _N,
        _SUM,
        "Prompt length per finished request.",
        "vLLM prompt length",
    ),
    _row(
        "vllm:request_generation_tokens",
        _H,
        _N,
        _SUM,
        "Output length per finished request.",
        "vLLM generation length",
    ),
    _row(
        "vllm:iteration_tokens_total",
        _H,
        _N,
        _SUM,
        "Tokens (prefill + decode) per engine step.",
        "vLLM step tokens",
    ),
    _row(
        "vllm:spec_decode_num_drafts_total",
        _C,
        _N,
        _SUM,
        "Speculative draft rounds.",
        "vLLM spec decode",
        "Drafts",
    ),
    _row(
        "vllm:spec_decode_num_draft_tokens_total",
        _C,
        _N,
        _SUM,
        "Draft tokens proposed.",
        "vLLM spec decode",
        "Draft tokens",
    ),
    _row(
        "vllm:spec_decode_num_accepted_tokens_total",
        _C,
        _N,
        _SUM,
        "Draft tokens accepted.",
        "vLLM spec decode",
        "Accepted tokens",
    ),
)
"""vLLM V1 metrics a dashboard shows (exporters.md §1.1), under their ≥0.12 names."""

_SG = SGLANG_RANKS
_NONE = Ranks()
SGLANG: tuple[MetricDef, ...] = (
    _row("sglang:num_running_reqs", _G, _N, _SUM, "Running requests.", "SGLang requests", "Running", _SG),
    _row(
        "sglang:num_queue_reqs",
        _G,
        _N,
        _SUM,
        "Requests in the waiting queue.",
        "SGLang requests",
        "Queued",
        _SG,
    ),
    _row(
        "sglang:num_paused_reqs",
        _G,
        _N,
        _SUM,
        "Requests paused by async weight sync.",
        "SGLang requests",
        "Paused",
        _SG,
    ),
    _row(
        "sglang:num_retracted_reqs", _G, _N, _SUM, "Requests retracted.", "SGLang requests", "Retracted", _SG
    ),
    _row(
        "sglang:token_usage",
        _G,
        _R,
        _MEAN,
        "KV pool usage (0-1), mean across ranks.",
        "SGLang KV-cache usage",
        "",
        _SG,
    ),
    _row("sglang:num_used_tokens", _G, _N, _SUM, "KV tokens in use.", "SGLang KV tokens", "", _SG),
    _row(
        "sglang:cache_hit_rate",
        _G,
        _R,
        _MEAN,
        "Prefix (radix) cache hit rate over the engine's last log interval (0-1), mean across ranks.",
        "SGLang cache hit rate",
        "",
        _SG,
    ),
    _row(
        "sglang:gen_throughput",
        _G,
        _PS,
        _SUM,
        "Generation throughput in tokens/s over the engine's log interval, summed across ranks.",
        "SGLang generation throughput",
        "",
        _SG,
    ),
    _row(
        "sglang:spec_accept_length",
        _G,
        _N,
        _MEAN,
        "Mean accepted draft length.",
        "SGLang spec accept length",
        "",
        _SG,
    ),
    _row(
        "sglang:spec_accept_rate",
        _G,
        _R,
        _MEAN,
        "Accepted / drafted tokens (0-1).",
        "SGLang spec accept rate",
        "",
        _SG,
    ),
    _row("sglang:prompt_tokens_total", _C, _N, _SUM, "Prefill tokens.", "SGLang tokens", "Prompt", _NONE),
    _row(
        "sglang:generation_tokens_total",
        _C,
        _N,
        _SUM,
        "Generated tokens.",
        "SGLang tokens",
        "Generation",
        _NONE,
    ),
    _row(
        "sglang:cached_tokens_total",
        _C,
        _N,
        _SUM,
        "Prompt tokens served from the prefix cache.",
        "SGLang tokens",
        "Cached",
        _NONE,
    ),
    _row(
        "sglang:num_requests_total",
        _C,
        _N,
        _SUM,
        "Finished requests.",
        "SGLang finished requests",
        "Finished",
        _NONE,
    ),
    _row(
        "sglang:num_aborted_requests_total",
        _C,
        _N,
        _SUM,
        "Aborted requests.",
        "SGLang finished requests",
        "Aborted",
        _NONE,
    ),
    _row(
        "sglang:num_retracted_requests_total",
        _C,
        _N,
        _SUM,
        "Requests retracted (SGLang's preemption).",
        "SGLang retractions",
        "",
        _SG,
    ),
    _row(
        "sglang:time_to_first_token_seconds",
        _H,
        _S,
        _SUM,
        "Time to first token, in seconds.",
        "SGLang TTFT",
        "",
        _NONE,
    ),
    _row(
        "sglang:inter_token_latency_seconds",
        _H,
        _S,
        _SUM,
        "Inter-token latency, in seconds (early name time_per_output_token_seconds).",
        "SGLang inter-token latency",
        "",
        _NONE,
    ),
    _row(
        "sglang:e2e_request_latency_seconds",
        _H,
        _S,
        _SUM,
        "End-to-end latency, in seconds.",
        "SGLang e2e latency",
        "",
        _NONE,
    ),
    _row(
        "sglang:queue_time_seconds", _H, _S, _SUM, "Queueing time, in seconds.", "SGLang queue time", "", _SG
    ),
)
"""SGLang metrics a dashboard shows (exporters.md §2.1)."""

_INV, _RATE, _RATIO = Formula.INVERSE, Formula.RATE, Formula.RATIO
DERIVED: tuple[MetricDef, ...] = (
    _derived(
        "vllm:decode_tokens_per_second",
        _PS,
        _INV,
        ("vllm:inter_token_latency_seconds",),
        "Decode speed of one stream: 1 / mean(ITL) = Δcount / Δsum; median 1 / p50; slow tail p1 = 1 / p99.",
        "vLLM decode tokens per second",
    ),
    _derived(
        "vllm:output_tokens_per_second",
        _PS,
        _RATE,
        ("vllm:generation_tokens_total",),
        "Output token throughput: Δ generation tokens / seconds, summed across engines and replicas.",
        "vLLM output token throughput",
    ),
    _derived(
        "vllm:prefix_cache_hit_rate",
        _R,
        _RATIO,
        ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
        "Prefix (KV) cache hit rate: Δhits / Δqueries.",
        "vLLM prefix cache hit rate",
    ),
    _derived(
        "vllm:spec_decode_acceptance_rate",
        _R,
        _RATIO,
        ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),
        "Speculative decoding acceptance rate: Δaccepted tokens / Δdraft tokens.",
        "vLLM spec decode acceptance rate",
    ),
    _derived(
        "vllm:spec_decode_mean_acceptance_length",
        _N,
        Formula.ONE_PLUS_RATIO,
        ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_drafts_total"),
        "Mean acceptance length: 1 + Δaccepted tokens / Δdrafts.",
        "vLLM spec decode acceptance length",
    ),
    _derived(
        "sglang:decode_tokens_per_second",
        _PS,
        _INV,
        ("sglang:inter_token_latency_seconds",),
        "Decode speed of one stream: 1 / mean(ITL) = Δcount / Δsum; median 1 / p50; slow tail p1 = 1 / p99.",
        "SGLang decode tokens per second",
    ),
    _derived(
        "sglang:output_tokens_per_second",
        _PS,
        _RATE,
        ("sglang:generation_tokens_total",),
        "Output token throughput: Δ generation tokens / seconds, summed across replicas.",
        "SGLang output token throughput",
    ),
    _derived(
        "sglang:prefix_cache_hit_rate",
        _R,
        _RATIO,
        ("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
        "Prefix cache hit rate by tokens: Δcached tokens / Δprompt tokens.",
        "SGLang prefix cache hit rate",
    ),
)
"""Metrics computed per value set from the rows above (``MetricDef.derived``; docs/catalog.md)."""
