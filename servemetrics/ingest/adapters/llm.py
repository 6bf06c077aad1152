"""vLLM and SGLang series adapted to the ``baseten_llm_*`` set (``catalog.llm``; issue 13 part 2), only
where the engine measures what the platform's metric means (exporters.md §1, §2, §7; platform-facts §1;
metrics-dashboard.md "LLM token speed"). Each adapted sample keeps every label of the engine's (its
``engine`` / ``dp_rank``, its bucket bounds: a histogram keeps the engine's own layout) and gets
``source="vllm"`` / ``"sglang"``; the engine series is still stored under its own name as well.

A replica's native ``baseten_llm_*`` series win over these (``Rule.preference`` 0 here, 1 in
``passthrough``; the query layer's ``MetricDef.sources``). Rows of the catalog with no derivation, and
why, are in ``NOT_DERIVED``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servemetrics.catalog.llm import TPOT, TTFT
from servemetrics.catalog.model import Kind
from servemetrics.ingest.adapters.engines import source_of
from servemetrics.ingest.adapters.rules import Rule


@dataclass(frozen=True)
class Derivation:
    """One engine family adapted to one ``baseten_llm_*`` family: ``old`` names are earlier spellings of
    ``engine`` (engines.ALIASES), adapted too but losing to ``engine`` in one scrape (priority -1)."""

    engine: str
    target: str
    kind: Kind
    reason: str
    old: tuple[str, ...] = ()
    state: str = ""
    """For two engine families that add up to one target (running + waiting requests): the value of the
    ``state`` label that keeps them apart (``Rule.constant``); "" adds none."""


_C, _H = Kind.COUNTER, Kind.HISTOGRAM
IN, OUT = "baseten_llm_input_tokens", "baseten_llm_output_tokens"

DERIVATIONS: tuple[Derivation, ...] = (
    Derivation(
        "vllm:prompt_tokens_total",
        IN + "_total",
        _C,
        "prefill (prompt) tokens processed: the input tokens (exporters.md §7 'Prompt / generated tokens')",
    ),
    Derivation(
        "sglang:prompt_tokens_total",
        IN + "_total",
        _C,
        "prefill tokens: the input tokens (§7)",
    ),
    Derivation("vllm:generation_tokens_total", OUT + "_total", _C, "generated tokens (§7)"),
    Derivation("sglang:generation_tokens_total", OUT + "_total", _C, "generated tokens (§7)"),
    Derivation(
        "vllm:request_prompt_tokens",
        IN + "_per_request",
        _H,
        "prompt length, one observation per finished request",
    ),
    Derivation(
        "sglang:prompt_tokens_histogram",
        IN + "_per_request",
        _H,
        "prompt tokens per request (only with SGLang's tokens-histogram collection on)",
    ),
    Derivation(
        "vllm:request_generation_tokens",
        OUT + "_per_request",
        _H,
        "output length, one observation per finished request",
    ),
    Derivation(
        "sglang:generation_tokens_histogram",
        OUT + "_per_request",
        _H,
        "generated tokens per request (only with tokens-histogram collection on)",
    ),
    Derivation(
        "vllm:spec_decode_num_accepted_tokens_total",
        "baseten_llm_spec_decode_num_accepted_tokens_total",
        _C,
        "draft tokens accepted (SGLang exposes only gauges: spec_accept_rate / length, no counters)",
    ),
    Derivation(
        "vllm:spec_decode_num_draft_tokens_total",
        "baseten_llm_spec_decode_num_draft_tokens_total",
        _C,
        "draft tokens proposed",
    ),
    Derivation(
        "vllm:num_requests_running",
        "baseten_llm_num_requests",
        Kind.GAUGE,
        "requests in the engine's batches; with the waiting ones, the requests in flight in the engine "
        "(platform-facts §1: concurrent in-flight requests across the workers)",
        state="running",
    ),
    Derivation(
        "vllm:num_requests_waiting",
        "baseten_llm_num_requests",
        Kind.GAUGE,
        "requests waiting to be scheduled: the other part of the in-flight requests",
        state="waiting",
    ),
    Derivation(
        "sglang:num_running_reqs",
        "baseten_llm_num_requests",
        Kind.GAUGE,
        "running requests (scheduler: tensor-parallel ranks repeat it, counted once)",
        state="running",
    ),
    Derivation(
        "sglang:num_queue_reqs",
        "baseten_llm_num_requests",
        Kind.GAUGE,
        "requests in the waiting queue",
        state="waiting",
    ),
    Derivation(
        "vllm:inter_token_latency_seconds",
        TPOT,
        _H,
        "the gap since the request's previous output, one observation per engine step: the platform's "
        "per-chunk time per output token when a step emits one token per request; with speculative "
        "decoding a step's gap covers all its accepted tokens (read higher than the platform's)",
        ("vllm:time_per_output_token_seconds",),
    ),
    Derivation(
        "sglang:inter_token_latency_seconds",
        TPOT,
        _H,
        "each chunk's gap divided by its new tokens, as the platform's; SGLang adds it once per token, the "
        "platform once per chunk: equal when chunks carry one token (stream interval 1, no spec decode)",
        ("sglang:time_per_output_token_seconds",),
    ),
    Derivation(
        "vllm:time_to_first_token_seconds",
        TTFT,
        _H,
        "request arrival in the engine's frontend to its first token: engine queueing and prefill",
    ),
    Derivation(
        "sglang:time_to_first_token_seconds",
        TTFT,
        _H,
        "tokenizer-side arrival to first token: engine queueing and prefill",
    ),
)
"""Every derivation, with the reason its semantics match (docs/catalog.md repeats the table)."""

NOT_DERIVED: dict[str, str] = {
    "baseten_llm_tokens_per_second_per_request": "the platform divides output tokens by the request's whole "
    "time, first-token delay included; vLLM's request_time_per_output_token_seconds leaves the first token "
    "out and is a time per token (inverting its buckets would not give the platform's distribution); "
    "SGLang has none",
    "baseten_llm_kv_cache_hit_rate": "a distribution of per-worker hit rates; vLLM has hit / query "
    "counters (vllm:prefix_cache_hit_rate), SGLang one gauge per interval (sglang:cache_hit_rate), "
    "neither a histogram of rates",
    "baseten_llm_in_flight_tokens": "worker load plus router-queued tokens; no engine counts the tokens "
    "queued ahead of it, and SGLang's sglang:num_used_tokens (KV tokens of running requests) is only the "
    "worker part",
    "baseten_llm_avg_in_flight_tokens": "the platform autoscaler's trailing average; no engine has it",
}
"""``baseten_llm_*`` rows with no engine source, and why (served from native series only)."""

_SUFFIXES = {_C: ("",), Kind.GAUGE: ("",), _H: ("_bucket", "_sum", "_count")}


def _rules() -> tuple[Rule, ...]:
    out: list[Rule] = []
    for d in DERIVATIONS:
        source = source_of(d.engine) or ""
        constant = (("state", d.state),) if d.state else ()
        for suffix in _SUFFIXES[d.kind]:
            out.append(Rule(d.engine + suffix, d.target + suffix, source, labels=None, constant=constant))
            for old in d.old:
                out.append(Rule(old + suffix, d.target + suffix, source, labels=None, priority=-1))
    return tuple(out)


RULES: tuple[Rule, ...] = _rules()
"""The derivation rules: one per sample name (counters as exposed, histograms per suffix)."""
