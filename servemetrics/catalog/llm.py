"""The ``baseten_llm_*`` set (platform-facts §1 "BIS-LLM metrics"; issue 13 part 2), the in-engine time to
first token and the speeds derived from them, so every engine gets the same LLM graphs.

Sources (``ingest.adapters.llm``, reasons per row there and in docs/catalog.md): samples already named
``baseten_llm_*`` are kept as they are (passthrough, no ``source`` label); vLLM and SGLang series are
adapted to these names only where exporters.md says the semantics match (``source="vllm"`` /
``"sglang"``; running and waiting requests add up as ``state`` children). Rows with no engine
equivalent (tokens/s per request, KV-cache hit-rate histogram, in-flight tokens) come from the
passthrough only.

One replica, one source (``Scope.REPLICA``, ``sources=("",)``): when a replica reports a native
``baseten_llm_*`` series and an engine series adapted to the same name, the native one is used in that
value set, never both (no double counting); a replica with only engine series uses those.
Ranks: vLLM's ``engine`` and SGLang's ``dp_rank`` (data-parallel) add up; SGLang's tokenizer-side
metrics carry no rank label, its scheduler gauges (running / queued requests) repeat per ``tp_rank`` /
``pp_rank`` and count once. Every graph is hidden by default, as the engines'.
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
    Scope,
    Unit,
)

NATIVE_FIRST: tuple[str, ...] = ("",)
"""``MetricDef.sources`` of the stored rows: the replica's own ``baseten_llm_*`` series (no ``source``
label) before any engine adapted to the name (``vllm`` / ``sglang``, which rank after it, equal)."""
LLM_RANKS = Ranks(parallel=("engine", "dp_rank"))
"""vLLM ``engine`` / SGLang ``dp_rank``: data-parallel ranks serve their own requests, so they add up."""
SCHEDULER_RANKS = Ranks(parallel=("engine", "dp_rank"), copies=("tp_rank", "pp_rank"))
"""``baseten_llm_num_requests`` from SGLang's scheduler gauges: its tensor / pipeline ranks repeat one value
(counted once, as ``catalog.engines.SGLANG_RANKS``); a native series has none of these labels."""

_G, _C, _H = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM
_N, _S, _R, _PS = Unit.COUNT, Unit.SECONDS, Unit.RATIO, Unit.PER_SECOND


def _row(
    name: str, kind: Kind, unit: Unit, help: str, panel: str, legend: str = "", ranks: Ranks = LLM_RANKS
) -> MetricDef:
    label_sets = HISTOGRAM_LABEL_SETS if kind is Kind.HISTOGRAM else PLAIN_LABEL_SETS
    return MetricDef(
        name,
        kind,
        unit,
        Aggregation.SUM,
        help,
        scope=Scope.REPLICA,
        label_sets=label_sets,
        panel=panel,
        legend=legend,
        sources=NATIVE_FIRST,
        ranks=ranks,
    )


def derived_row(
    name: str, unit: Unit, formula: Formula, inputs: tuple[str, ...], help: str, panel: str, legend: str = ""
) -> MetricDef:
    """A derived metric's row (``MetricDef.derived``): ``Formula.INVERSE`` rows (token speeds from a
    time-per-token histogram) take ``SPEED_LABEL_SETS``, the others one plain label set. Shared by
    every token-speed row (the Model APIs' too, ``catalog.model_apis``)."""
    label_sets = SPEED_LABEL_SETS if formula is Formula.INVERSE else PLAIN_LABEL_SETS
    return MetricDef(
        name,
        Kind.GAUGE,
        unit,
        Aggregation.SUM,
        help,
        label_sets=label_sets,
        panel=panel,
        legend=legend,
        derived=Derived(formula, inputs),
    )


TPOT = "baseten_llm_time_per_output_token_seconds"
TTFT = "baseten_llm_time_to_first_token_seconds"
"""Not in platform-facts §1: our name for the in-engine TTFT graph (metrics-dashboard.md "BIS-LLM
metrics": measured inside the engine, engine queueing and prefill, not platform routing)."""

STORED: tuple[MetricDef, ...] = (
    _row("baseten_llm_input_tokens_total", _C, _N, "Input (prompt) tokens processed.", "LLM tokens", "Input"),
    _row("baseten_llm_output_tokens_total", _C, _N, "Output tokens generated.", "LLM tokens", "Output"),
    _row(
        "baseten_llm_input_tokens_per_request",
        _H,
        _N,
        "Input tokens per request (distribution).",
        "LLM input tokens per request",
    ),
    _row(
        "baseten_llm_output_tokens_per_request",
        _H,
        _N,
        "Output tokens per request (distribution).",
        "LLM output tokens per request",
    ),
    _row(
        "baseten_llm_tokens_per_second_per_request",
        _H,
        _PS,
        "Output tokens per second of each request, first-token delay included (distribution).",
        "LLM tokens per second per request",
    ),
    _row(
        "baseten_llm_kv_cache_hit_rate",
        _H,
        _R,
        "KV-cache hit rates observed by workers, 0-1 (distribution).",
        "LLM KV-cache hit rate",
    ),
    _row(
        "baseten_llm_spec_decode_num_accepted_tokens_total",
        _C,
        _N,
        "Accepted speculative-decoding tokens (only while spec decode is active).",
        "LLM spec decode",
        "Accepted tokens",
    ),
    _row(
        "baseten_llm_spec_decode_num_draft_tokens_total",
        _C,
        _N,
        "Draft tokens proposed by speculative decoding (only while spec decode is active).",
        "LLM spec decode",
        "Draft tokens",
    ),
    _row(
        "baseten_llm_in_flight_tokens",
        _G,
        _N,
        "In-flight tokens (worker load plus router-queued tokens), summed across workers.",
        "LLM in-flight tokens",
        "In flight",
    ),
    _row(
        "baseten_llm_avg_in_flight_tokens",
        _G,
        _N,
        "Trailing average of in-flight tokens over the autoscaling window, summed across workers.",
        "LLM in-flight tokens",
        "Trailing average",
    ),
    _row(
        "baseten_llm_num_requests",
        _G,
        _N,
        "Concurrent in-flight requests across LLM workers (engines: running + waiting).",
        "LLM requests",
        ranks=SCHEDULER_RANKS,
    ),
    _row(
        TPOT,
        _H,
        _S,
        "Time per output token after the first, in seconds (one observation per output chunk).",
        "LLM time per output token",
    ),
    _row(
        TTFT,
        _H,
        _S,
        "Time to first token measured in the engine (engine queueing and prefill, no routing), in seconds.",
        "LLM time to first token (in engine)",
    ),
)
"""The stored rows: platform-facts §1's eleven, the time per output token and the in-engine TTFT."""

DERIVED: tuple[MetricDef, ...] = (
    derived_row(
        "baseten_llm_input_tokens_per_second",
        _PS,
        Formula.RATE,
        ("baseten_llm_input_tokens_total",),
        "Input token throughput: Δ input tokens / seconds, summed across replicas.",
        "LLM token throughput",
        "Input",
    ),
    derived_row(
        "baseten_llm_output_tokens_per_second",
        _PS,
        Formula.RATE,
        ("baseten_llm_output_tokens_total",),
        "Output token throughput: Δ output tokens / seconds, summed across replicas.",
        "LLM token throughput",
        "Output",
    ),
    derived_row(
        "baseten_llm_decode_tokens_per_second",
        _PS,
        Formula.INVERSE,
        (TPOT,),
        "Decode speed of one stream: 1 / mean(TPOT) = Δcount / Δsum; median 1 / p50; slow tail p1 = 1 / p99.",
        "LLM decode tokens per second",
    ),
    derived_row(
        "baseten_llm_spec_decode_acceptance_rate",
        _R,
        Formula.RATIO,
        (
            "baseten_llm_spec_decode_num_accepted_tokens_total",
            "baseten_llm_spec_decode_num_draft_tokens_total",
        ),
        "Speculative decoding acceptance rate: Δaccepted tokens / Δdraft tokens.",
        "LLM spec decode acceptance rate",
    ),
)
"""Metrics computed per value set from the stored rows (``MetricDef.derived``; docs/catalog.md)."""

LLM_ROWS: tuple[MetricDef, ...] = STORED + DERIVED
"""Every LLM row, in panel order (after the platform's rows, before the engines', in ``CATALOG``)."""
