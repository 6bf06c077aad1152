"""vLLM and SGLang engine metrics: stored under their own names with all their labels, plus
``source="vllm"`` / ``"sglang"``. Names renamed by an engine upgrade (``ALIASES``)
are stored under the new name; when both names appear at the same time, the new name's sample wins
(regression case C9), never the sum."""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
    "sglang:time_per_output_token_seconds": "sglang:inter_token_latency_seconds",
}
"""Source metric renamed by an engine upgrade -> the name it is stored under, so the series stays
continuous (exporters.md §1 version timeline: vLLM 0.9 renamed the cache metrics, 0.11 the TPOT
histogram; SGLang's early TPOT histogram is its ITL). Keys and values are family names: every sample
suffix (``_total``, ``_bucket``, ``_sum``, ``_count``) follows, and so do creation times (the scraper
adapts the zeros it dates). When both names appear in one scrape, the new name's sample wins
(regression case C9), never the sum. vLLM ≈0.8 counted
``gpu_prefix_cache_*`` in blocks, later versions in tokens: stored as they come (docs/catalog.md)."""

PREFIXES: dict[str, str] = {"vllm:": "vllm", "sglang:": "sglang"}
"""Engine name prefix -> ``source`` label; any sample with such a prefix is kept under its own name."""

MARKERS: dict[str, str] = {
    "nv_inference_request_success": "triton",
    "nv_trt_llm_request_metrics": "triton",
}
"""Triton series kept as they are (``source="triton"``) only so that engine detection
(``catalog.detection.MARKERS``) can tell a Triton deployment: Triton core's per-model success counter and
the TensorRT-LLM backend's request gauge (exporters.md §6). Triton has no graphs; its other series are
dropped."""

_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count")


def source_of(name: str) -> str | None:
    """The engine ``source`` of a sample name, or ``None`` when it is not an engine metric."""
    if name in MARKERS:
        return MARKERS[name]
    for prefix, source in PREFIXES.items():
        if name.startswith(prefix):
            return source
    return None


def _alias_rules() -> tuple[Rule, ...]:
    out: list[Rule] = []
    for old, new in ALIASES.items():
        source = source_of(new) or ""
        for suffix in _SUFFIXES:
            out.append(Rule(old + suffix, new + suffix, source, labels=None, priority=-1))
    return tuple(out)


RULES: tuple[Rule, ...] = _alias_rules()
"""Alias rules only; every other engine sample passes through ``passthrough_rule``."""


def passthrough_rule(name: str) -> Rule | None:
    """The keep-as-is rule for an engine sample name (``None`` for non-engine names)."""
    source = source_of(name)
    return None if source is None else Rule(name, name, source, labels=None)
