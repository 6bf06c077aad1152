"""The data shape of a source adapter: ``Rule`` rows, one per source sample name.

A rule is declarative so that a later issue can compile it to a PromQL recording rule::

    <target>{<kept labels, renamed>, source="<source>"} = <match>{<where matchers>} / <divisor>

Missing labels count as ``""`` in matchers, as in PromQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servemetrics.ingest.exposition import format_bound


@dataclass(frozen=True)
class LabelMatch:
    """A PromQL-style matcher: label ``name`` fully matches regex ``pattern`` (``=~``), or does not
    (``!~``) when ``negate``. An absent label is ``""``."""

    name: str
    pattern: str
    negate: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_re", re.compile(self.pattern))

    def ok(self, labels: dict[str, str]) -> bool:
        """True when ``labels`` satisfy this matcher."""
        hit = self._re.fullmatch(labels.get(self.name, "")) is not None  # type: ignore[attr-defined]
        return hit != self.negate


@dataclass(frozen=True)
class Rule:
    """Map one source sample name to one canonical sample name.

    Attributes:
        match: the source sample name as exposed (``x_total``, ``x_bucket``...).
        target: the canonical sample name it is stored under.
        source: value of the added ``source`` label; ``""`` adds none (passthrough).
        labels: source label -> canonical label to keep; ``None`` keeps every label as is.
        where: matchers that must all hold, else the rule does not apply.
        divisor: value transform ``value / divisor`` (100: percent -> ratio, 1000: ms -> s).
        le_divisor: the same for the ``le`` bucket bound (ms buckets -> s buckets).
        le_bounds: the source's known bucket bounds (before rescaling), needed only to compile an
            ``le_divisor`` to a PromQL recording rule (``ingest.recording_rules``: PromQL cannot
            divide a label, so each known bound gets its own rewrite); ingest here rescales any bound.
        priority: when two rules produce the same series at the same time, the higher wins
            (equal: the first sample seen wins).
        preference: among rules of one canonical name with different ``source``s that are views of one
            replica's container (cAdvisor, kubelet resource metrics, the process collector), the higher
            is used per replica, never a sum. Ingest stores every view; the query layer picks per
            replica and value set by the catalog's ``MetricDef.sources`` (the truth: a test holds this
            column to the same order), the recording rules record a view only
            ``unless on (model_id, deployment_id, replica)`` a higher one has a series.
        constant: labels added with a fixed value, ``(name, value)`` pairs: they tell apart two source
            series that become one canonical name and must add up (vLLM's running and waiting requests
            as ``baseten_llm_num_requests{state=...}``), where the same labels would make one replace
            the other (``priority``).
        rename: with ``labels=None`` (every label kept), source labels kept under another name,
            ``(source, canonical)`` pairs (a custom server's ``status`` -> ``status_code``); the rule's
            ``where`` should require the canonical name absent, so the rename never overwrites a label.
    """

    match: str
    target: str
    source: str = ""
    labels: dict[str, str] | None = field(default_factory=dict)
    where: tuple[LabelMatch, ...] = ()
    divisor: float = 1.0
    le_divisor: float = 1.0
    priority: int = 0
    le_bounds: tuple[float, ...] = ()
    preference: int = 0
    constant: tuple[tuple[str, str], ...] = ()
    rename: tuple[tuple[str, str], ...] = ()

    def applies(self, labels: dict[str, str]) -> bool:
        """True when every ``where`` matcher holds for ``labels``."""
        return all(m.ok(labels) for m in self.where)

    def map_labels(self, labels: dict[str, str]) -> dict[str, str]:
        """The canonical labels of a source series (empty values dropped, ``le`` rescaled)."""
        if self.labels is None:
            out = dict(labels)
            for src, dst in self.rename:
                if src in out:
                    out[dst] = out.pop(src)
        else:
            out = {dst: labels[src] for src, dst in self.labels.items() if labels.get(src)}
        if "le" in out and self.le_divisor != 1.0 and out["le"] != "+Inf":
            out["le"] = format_bound(float(out["le"]) / self.le_divisor)
        out.update(self.constant)
        if self.source:
            out["source"] = self.source
        return out


def histogram(
    match: str,
    target: str,
    source: str,
    labels: dict[str, str],
    *,
    divisor: float = 1.0,
    where: tuple[LabelMatch, ...] = (),
    priority: int = 0,
    le_bounds: tuple[float, ...] = (),
) -> tuple[Rule, ...]:
    """The three rules of a histogram: ``_bucket`` (le rescaled by ``divisor``; ``le_bounds``: the
    source's known bounds, see ``Rule``), ``_sum`` (value divided by ``divisor``) and ``_count``."""
    with_le = {**labels, "le": "le"}
    return (
        Rule(
            f"{match}_bucket",
            f"{target}_bucket",
            source,
            with_le,
            where,
            le_divisor=divisor,
            priority=priority,
            le_bounds=le_bounds,
        ),
        Rule(f"{match}_sum", f"{target}_sum", source, labels, where, divisor=divisor, priority=priority),
        Rule(f"{match}_count", f"{target}_count", source, labels, where, priority=priority),
    )


NOT_EMPTY = ".+"
"""Matcher pattern for a label that is present and not empty (PromQL ``=~".+"``)."""
