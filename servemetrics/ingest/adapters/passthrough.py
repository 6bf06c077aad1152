"""Canonical ``baseten_*`` series exposed by a platform-compatible gateway: kept as they are, except
GPU utilisation, which the platform exports in percent and we store as a 0-1 ratio. Engine rows of the
catalog (``vllm:*``, ``sglang:*``) are left to ``engines``, which adds their ``source``."""

from __future__ import annotations

from servemetrics.catalog.metrics import CATALOG
from servemetrics.catalog.model import Kind
from servemetrics.ingest.adapters.rules import Rule

_SUFFIXES = {Kind.HISTOGRAM: ("_bucket", "_sum", "_count")}
_DIVISORS = {"baseten_gpu_utilization": 100.0}


def _rules() -> tuple[Rule, ...]:
    out: list[Rule] = []
    for name, metric in CATALOG.items():
        if ":" in name:
            continue  # engine metrics and the metrics derived from them: ``engines``, not passthrough
        for suffix in _SUFFIXES.get(metric.kind, ("",)):
            out.append(Rule(name + suffix, name + suffix, labels=None, divisor=_DIVISORS.get(name, 1.0)))
    return tuple(out)


RULES: tuple[Rule, ...] = _rules()
