"""Drill-down (``group_by``, our extension): the pieces of a split answer that need no recipe.

A split answer runs the metric's own recipe (``execute``) once per part, with the part's labels as
extra matchers, so each part gets exactly the rules of the ungrouped answer restricted to its series:
a replica's mean across its GPUs, a replica's own quantiles, one deployment's value. This module checks
a request's ``group_by`` against the catalog's rules (``catalog.splits``), says which series reveal the
parts present in a window, and lays out the label sets. docs/query-semantics.md "Drill-down".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from servemetrics.catalog import CATALOG
from servemetrics.catalog.model import PLAIN_LABEL_SETS, Kind, MetricDef
from servemetrics.catalog.splits import SPLIT_LABELS, Split, accepts, splits_of
from servemetrics.query.errors import SplitError
from servemetrics.store.base import GroupKey, Reducer, SelectResult
from servemetrics.types import Matchers

LIVE_LABELS = frozenset({"replica", "deployment_id"})
"""Split labels that the ``up`` series carries too: a part's "was a target up" check keeps them (a
replica's counter reads 0 while its own target is up), the others (``gpu``, ``status_code``) are dropped."""


def check_split(metrics: Sequence[MetricDef], split: Split | None) -> None:
    """Refuse a ``group_by`` that a requested metric does not accept.

    Raises:
        SplitError: ``group_by=gpu does not apply to baseten_inference_requests_total, which accepts
            group_by=replica, deployment, status_code`` (every such metric named).
    """
    if split is None:
        return
    bad = [m for m in metrics if not accepts(m, split)]
    if bad:
        what = "; ".join(f"{m.name}, which accepts group_by={', '.join(splits_of(m))}" for m in bad[:10])
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise SplitError(
            f"group_by={split.value} does not apply to {what}{more}; request those metrics without "
            "group_by or with a value they accept (docs/query-semantics.md, Drill-down)"
        )


def probe(metric: MetricDef, current: bool) -> tuple[str, Reducer]:
    """The stored series and reducer whose groups reveal the parts of ``metric`` with data in a window:
    the metric itself (a histogram's ``_count``, a derived metric's first input)."""
    if metric.derived is not None:
        return probe(CATALOG[metric.derived.inputs[0]], current)
    if metric.kind is Kind.HISTOGRAM:
        return metric.name + "_count", Reducer.INCREASE
    if metric.kind is Kind.COUNTER:
        return metric.name, Reducer.INCREASE
    return metric.name, Reducer.LAST if current else Reducer.MEAN


def present_parts(res: SelectResult, split: Split) -> list[GroupKey]:
    """The keys of ``res`` (grouped by ``split``'s labels) with a value in some value set and every split
    label set (a team split: ``""`` too, the keys without a team), sorted: the parts of the answer."""
    whole = split is not Split.TEAM
    return sorted(
        k for k, cells in res.items() if (all(k) or not whole) and any(c is not None for c in cells)
    )


def part_metric(metric: MetricDef, split: Split) -> MetricDef:
    """The metric to run for one part: ``status_code`` parts are plain (one exact code, no classes)."""
    if split is Split.STATUS_CODE:
        return dataclasses.replace(metric, by_label=None, label_sets=PLAIN_LABEL_SETS)
    return metric


def split_labels(split: Split) -> tuple[str, ...]:
    """The stored labels that identify one part of ``split`` (``catalog.splits.SPLIT_LABELS``)."""
    return SPLIT_LABELS[split]


def part_matchers(split: Split, key: GroupKey) -> Matchers:
    """Label matchers selecting the series of one part."""
    return tuple(zip(SPLIT_LABELS[split], key, strict=True))


def part_label_sets(metric: MetricDef, split: Split, key: GroupKey) -> tuple[dict[str, str], ...]:
    """The label sets of one part: its split labels first, then each label set of ``part_metric``."""
    lead = dict(part_matchers(split, key))
    return tuple({**lead, **ls} for ls in part_metric(metric, split).label_sets)
