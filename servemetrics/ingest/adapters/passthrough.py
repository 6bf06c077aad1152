"""Canonical ``baseten_*`` series exposed by a platform-compatible gateway: kept as they are, except
GPU utilisation, which the platform exports in percent and we store as a 0-1 ratio. Engine rows of the
catalog (``vllm:*``, ``sglang:*``) are left to ``engines``, which adds their ``source``; derived rows are
computed at query time, never stored.

``baseten_llm_*`` rows (``catalog.llm``) are one replica's preferred view (``Rule.preference`` 1 over the
engine series ``adapters.llm`` adapts to the same names, as ``MetricDef.sources`` says). Their
histograms are also accepted as the platform's export spells them, ``_bucket_total`` / ``_sum_total`` /
``_count_total`` (metrics-dashboard.md "Compute decode tokens per second from exports"), stored under
the plain suffixes; when both spellings appear, the plain one wins.
"""

from __future__ import annotations

from servemetrics.catalog.metrics import CATALOG
from servemetrics.catalog.model import Kind
from servemetrics.ingest.adapters.rules import Rule

_SUFFIXES = {Kind.HISTOGRAM: ("_bucket", "_sum", "_count")}
_DIVISORS = {"baseten_gpu_utilization": 100.0}
LLM_PREFIX = "baseten_llm_"
LLM_PREFERENCE = 1
"""``Rule.preference`` of a native ``baseten_llm_*`` series over an engine's adapted one (0)."""


def _rules() -> tuple[Rule, ...]:
    out: list[Rule] = []
    for name, metric in CATALOG.items():
        if ":" in name or metric.derived is not None:
            continue  # engine metrics: ``engines``, not passthrough; derived metrics are not stored
        preference = LLM_PREFERENCE if name.startswith(LLM_PREFIX) else 0
        divisor = _DIVISORS.get(name, 1.0)
        for suffix in _SUFFIXES.get(metric.kind, ("",)):
            out.append(
                Rule(name + suffix, name + suffix, labels=None, divisor=divisor, preference=preference)
            )
            if preference and metric.kind is Kind.HISTOGRAM:
                exported = name + suffix + "_total"
                out.append(Rule(exported, name + suffix, labels=None, priority=-1, preference=preference))
    return tuple(out)


RULES: tuple[Rule, ...] = _rules()
