"""vLLM and SGLang engine metrics: stored under their own names with all their labels, plus
``source="vllm"`` / ``"sglang"``. Names renamed by an engine upgrade (``ALIASES``)
are stored under the new name; when both names appear at the same time, the new name's sample wins
(regression case C9), never the sum."""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
}
"""Source metric renamed by an engine upgrade -> the name it is stored under, so the series stays
continuous. When both names appear in one scrape, the new name's sample wins (regression case C9)."""

PREFIXES: dict[str, str] = {"vllm:": "vllm", "sglang:": "sglang"}
"""Engine name prefix -> ``source`` label; any sample with such a prefix is kept under its own name."""

_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count")


def source_of(name: str) -> str | None:
    """The engine ``source`` of a sample name, or ``None`` when it is not an engine metric."""
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
