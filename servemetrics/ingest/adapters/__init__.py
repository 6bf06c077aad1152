"""Source adapters: map exporter series to canonical series at ingest (DESIGN "one direction").

``ADAPTERS`` is the table of rules (see ``rules.Rule``), grouped by source for docs and recording rules;
it is not a per-source dispatch: ``adapt`` applies every source's rules, indexed by sample name, to one
scrape (or one backfill batch). Samples no rule maps are dropped, except engine metrics (``vllm:``,
``sglang:``), which are kept under their own names, also when a rule adapts them to another name
(``llm``: the ``baseten_llm_*`` set); an old engine name (``engines.ALIASES``) is kept only under the new;
and, in a scrape of a replica's target, custom metrics (``custom``: kept under their own names with
``source="custom"``, up to a limit per scrape).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from servemetrics.ingest.adapters import (
    cadvisor,
    custom_servers,
    dcgm,
    engines,
    inference_time,
    knative,
    kube_state,
    kubelet_summary,
    llm,
    node_exporter,
    passthrough,
    process,
)
from servemetrics.ingest.adapters.custom import CustomSeries
from servemetrics.ingest.adapters.rules import LabelMatch, Rule
from servemetrics.samples import Sample
from servemetrics.types import Labels, Millis, SeriesKey, labels_of

__all__ = ["ADAPTERS", "Adapted", "LabelMatch", "Rule", "adapt", "rules_for"]

ADAPTERS: dict[str, tuple[Rule, ...]] = {
    "passthrough": passthrough.RULES,
    "dcgm": dcgm.RULES,
    "cadvisor": cadvisor.RULES,
    "kube_state": kube_state.RULES,
    "process": process.RULES,
    "knative": knative.RULES,
    "custom_servers": custom_servers.RULES,
    "engines": engines.RULES,
    "llm": llm.RULES,
    "inference_time": inference_time.RULES,
    "kubelet_summary": kubelet_summary.RULES,
    "node_exporter": node_exporter.RULES,
}
"""Source adapter name -> its rules (grouped by source for docs and recording rules; ``adapt`` applies
them all). Engine samples without a rule are kept as they are."""


def _index() -> dict[str, tuple[Rule, ...]]:
    """Sample name -> its rules; an engine name that a rule adapts (``llm``) and no alias renames keeps
    its keep-as-is rule too, first (so it is still stored under its own name)."""
    index: dict[str, list[Rule]] = {}
    for adapter_rules in ADAPTERS.values():
        for rule in adapter_rules:
            index.setdefault(rule.match, []).append(rule)
    renamed = {rule.match for rule in engines.RULES}
    for name, listed in index.items():
        keep = engines.passthrough_rule(name) if name not in renamed else None
        if keep is not None:
            listed.insert(0, keep)
    return {name: tuple(listed) for name, listed in index.items()}


_INDEX = _index()


def rules_for(name: str) -> tuple[Rule, ...]:
    """The rules that apply to a source sample name (empty: the sample is dropped)."""
    rules = _INDEX.get(name)
    return rules if rules is not None else _engine_rules(name)


@functools.lru_cache(maxsize=100_000)
def _engine_rules(name: str) -> tuple[Rule, ...]:
    """The keep-as-is rule of a name no table lists: one for an engine sample, none for the rest."""
    rule = engines.passthrough_rule(name)
    return (rule,) if rule is not None else ()


def adapt(samples: Iterable[Sample], target_labels: Mapping[str, str], custom_limit: int = 0) -> list[Sample]:
    """Map source samples to canonical samples and attach ``target_labels``; with ``custom_limit`` > 0
    keep up to that many unmapped series as custom metrics (``custom.CustomSeries``).

    When two rules produce the same canonical series at the same timestamp (DCGM DEV vs PROF
    utilisation, an engine's old and new name), the rule with the higher priority wins, never a
    sum; at equal priority the first sample wins. Output order follows the input order.
    """
    adapted = Adapted(target_labels, custom_limit)
    adapted.add(samples)
    return adapted.samples


class Adapted:
    """``adapt`` in pieces (the scraper adapts a scrape while it is parsed, to stop at its
    ``sample_limit``): after ``add`` of each piece of the source samples in order, ``samples`` is what
    ``adapt`` of all of them so far returns. It never gets shorter (a later sample of a higher priority
    replaces one in place), so a count over a limit stays over it.

    Args:
        target_labels: the registry labels attached to every sample.
        custom_limit: custom series kept at most (``custom.CustomSeries``; 0: none, the default).

    Attributes:
        samples: the canonical samples so far.
        fed: the source samples added so far.
        custom: the custom series of the scrape: ``custom.dropped`` counts those not kept, by reason.
    """

    def __init__(self, target_labels: Mapping[str, str], custom_limit: int = 0) -> None:
        self._extra = {k: v for k, v in target_labels.items() if v}
        self.custom = CustomSeries(custom_limit)
        self.samples: list[Sample] = []
        self.fed = 0
        self._best: dict[tuple[str, Labels, Millis], tuple[int, int]] = {}
        self._plans: dict[SeriesKey, list[tuple[Rule, Labels]]] = {}

    def add(self, samples: Iterable[Sample]) -> None:
        """Adapt the next source samples (``adapt``'s rules)."""
        extra, out, best, plans, custom = self._extra, self.samples, self._best, self._plans, self.custom
        fed = 0
        for s in samples:
            fed += 1
            plan = plans.get((s.name, s.labels))
            if plan is None:
                plan = plans[(s.name, s.labels)] = _plan(s, extra, custom)
            for rule, labels in plan:
                key = (rule.target, labels, s.ts_ms)
                value = s.value / rule.divisor if rule.divisor != 1.0 else s.value
                prev = best.get(key)
                if prev is None:
                    best[key] = (rule.priority, len(out))
                    out.append(Sample(rule.target, labels, value, s.ts_ms))
                elif rule.priority > prev[0]:
                    best[key] = (rule.priority, prev[1])
                    out[prev[1]] = Sample(rule.target, labels, value, s.ts_ms)
        self.fed += fed


def _plan(sample: Sample, extra: dict[str, str], custom: CustomSeries) -> list[tuple[Rule, Labels]]:
    """The rules that apply to one source series, each with its canonical label set; a series no rule
    names is a custom series (kept or not by ``custom``)."""
    rules = rules_for(sample.name)
    if not rules:
        keep = custom.rule(sample.name, sample.labels)
        if keep is None:
            return []
        rules = (keep,)
    source_labels = dict(sample.labels)
    plan = []
    for rule in rules:
        if rule.applies(source_labels):
            labels = rule.map_labels(source_labels)
            labels.update(extra)
            plan.append((rule, labels_of(labels)))
    return plan
