"""``adapt`` for a columnar ``SampleBatch``: the rules applied once per *series*, the values in numpy.

Each source series gets a plan (``series_plan``: the canonical series its rules produce, each with the
rule's divisor and priority), cached across calls (bounded, ``PLAN_CACHE_SIZE``), so a series seen in an
earlier batch costs one dict look-up. The samples are then expanded, divided and deduplicated as arrays:
no Python object per sample. The result equals ``SampleBatch.from_samples(adapt(...))`` sample for sample,
in the same order, bit for bit (a test holds the two together on every exposition fixture).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from servemetrics.ingest.adapters import rules_for
from servemetrics.ingest.adapters.custom import CustomSeries
from servemetrics.ingest.adapters.rules import Rule
from servemetrics.labels import CUSTOM_SOURCE
from servemetrics.samples import SampleBatch
from servemetrics.types import Labels, SeriesKey, labels_of

__all__ = ["PLAN_CACHE_SIZE", "Plan", "adapt_batch", "adapt_batch_by_target", "series_plan"]

PLAN_CACHE_SIZE = 262_144
"""Series plans kept across calls (an LRU; a plan is a few tuples, so ~100 MB at most when full)."""

Plan = tuple[tuple[SeriesKey, float, int], ...]
"""The canonical series one source series becomes: ``(target series, divisor, priority)`` per rule
that applies, in rule order (``()``: the series is dropped)."""

_CUSTOM_RULE = functools.lru_cache(maxsize=65_536)(lambda name: Rule(name, name, CUSTOM_SOURCE, labels=None))


def _plan_of(rules: Sequence[Rule], labels: Labels, extra: Labels) -> Plan:
    source = dict(labels)
    out = []
    for rule in rules:
        if rule.applies(source):
            mapped = rule.map_labels(source)
            mapped.update(extra)
            out.append(((rule.target, labels_of(mapped)), rule.divisor, rule.priority))
    return tuple(out)


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def series_plan(name: str, labels: Labels, extra: Labels) -> Plan:
    """The plan of source series ``name{labels}`` with target labels ``extra`` (``Labels``, no empty
    values) attached: what ``adapt`` makes of each of its samples. A name no rule lists gives ``()``
    (custom series are planned by ``_custom_plan``, as their keeping depends on the scrape)."""
    return _plan_of(rules_for(name), labels, extra)


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _custom_plan(name: str, labels: Labels, extra: Labels) -> Plan:
    return _plan_of((_CUSTOM_RULE(name),), labels, extra)


def adapt_batch(
    batch: SampleBatch,
    target_labels: Mapping[str, str],
    custom_limit: int = 0,
    custom: CustomSeries | None = None,
) -> SampleBatch:
    """``SampleBatch.from_samples(adapt(batch.samples(), target_labels, custom_limit))``, columnar.

    Args:
        batch: the source samples (any order; output order follows it as ``adapt``'s does).
        target_labels: the registry labels attached to every sample (empty values are not attached).
        custom_limit: custom series kept at most (``custom.CustomSeries``; 0: none).
        custom: the scrape's ``CustomSeries`` to keep and count custom series in (made from
            ``custom_limit`` when None); its ``dropped`` tells what was not kept.

    Returns:
        The canonical samples: each canonical series once in ``series`` (first-use order), values divided
        by the rule's divisor, one sample per (series, timestamp): the highest priority wins, at equal
        priority the first.
    """
    extra = labels_of({k: v for k, v in target_labels.items() if v})
    custom = custom if custom is not None else CustomSeries(custom_limit)
    return _adapt(batch, lambda _i: extra, custom)


def adapt_batch_by_target(batch: SampleBatch, target_names: Sequence[str]) -> SampleBatch:
    """``adapt_batch`` of a batch of many targets (a remote_write body): each series gets as target labels
    its own values of ``target_names`` (``labels.TARGET_LABELS``), no custom series. Equals adapting each
    target's samples apart and joining the results (the order of samples may differ)."""
    names = frozenset(target_names)

    def extra_of(i: int) -> Labels:
        return tuple(kv for kv in batch.series[i][1] if kv[0] in names and kv[1])

    return _adapt(batch, extra_of, CustomSeries(0))


def _adapt(batch: SampleBatch, extra_of: Callable[[int], Labels], custom: CustomSeries) -> SampleBatch:
    n = len(batch)
    if not n:
        return _empty()
    table = _PlanTable(len(batch.series))
    for i in _first_use_order(batch, custom):
        name, labels = batch.series[i]
        extra = extra_of(i)
        plan = series_plan(name, labels, extra)
        if not plan and not rules_for(name) and custom.rule(name, labels) is not None:
            plan = _custom_plan(name, labels, extra)
        table.add(i, plan)
    return _expand(batch, table)


class _PlanTable:
    """The plans of one batch's series, flattened: entry ``plan_start[s] + j`` is series ``s``'s ``j``-th
    rule; ``targets`` the canonical series, in first-planned order."""

    def __init__(self, n_series: int) -> None:
        self.plan_start = np.zeros(n_series, dtype=np.int64)
        self.plan_len = np.zeros(n_series, dtype=np.int64)
        self.target_of: dict[SeriesKey, int] = {}
        self.entry_target: list[int] = []
        self.entry_divisor: list[float] = []
        self.entry_priority: list[int] = []

    def add(self, series: int, plan: Plan) -> None:
        """Record ``plan`` as series ``series``'s."""
        self.plan_start[series] = len(self.entry_target)
        self.plan_len[series] = len(plan)
        for target, divisor, priority in plan:
            self.entry_target.append(self.target_of.setdefault(target, len(self.target_of)))
            self.entry_divisor.append(divisor)
            self.entry_priority.append(priority)


def _first_use_order(batch: SampleBatch, custom: CustomSeries) -> list[int]:
    """The batch's series indexes to plan: in first-use order when custom series are kept (their limit
    keeps the first ones, as ``adapt`` does), else every series in table order."""
    if custom.limit <= 0:
        return list(range(len(batch.series)))
    used, first = np.unique(batch.series_index, return_index=True)
    return [int(i) for i in used[np.argsort(first, kind="stable")]]


def _expand(batch: SampleBatch, table: _PlanTable) -> SampleBatch:
    """Apply the plans: one output row per (sample, rule), divided, deduplicated, in ``adapt``'s order."""
    src_series = batch.series_index.astype(np.int64)
    counts = table.plan_len[src_series]
    if not table.entry_target or not counts.any():
        return _empty()
    starts = table.plan_start[src_series]
    if bool((counts == 1).all()):
        src, entry = None, starts
    else:
        src = np.repeat(np.arange(len(batch), dtype=np.int64), counts)
        ends = np.cumsum(counts)
        within = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - counts, counts)
        entry = np.repeat(starts, counts) + within
    target = np.asarray(table.entry_target, dtype=np.int64)[entry]
    ts = batch.ts_ms if src is None else batch.ts_ms[src]
    values = batch.values if src is None else batch.values[src]
    divisor = np.asarray(table.entry_divisor, dtype=np.float64)[entry]
    scaled = divisor != 1.0
    if scaled.any():  # only where a rule divides: x / 1.0 would turn the signalling STALE_NAN quiet
        values = values.copy()
        values[scaled] = values[scaled] / divisor[scaled]
    target, ts, values = _dedup(target, ts, values, np.asarray(table.entry_priority, dtype=np.int64)[entry])
    return _batch(list(table.target_of), target, ts, values)


def _dedup(
    target: np.ndarray, ts: np.ndarray, values: np.ndarray, priority: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per (target, ts) at the place of its first row, with the value of its highest-priority row
    (the first of those at equal priority): ``Adapted``'s rule, as arrays."""
    order = np.lexsort((ts, target))
    st, sts = target[order], ts[order]
    same = (st[1:] == st[:-1]) & (sts[1:] == sts[:-1])
    if not same.any():
        return target, ts, values
    position = np.arange(target.shape[0], dtype=np.int64)
    order = np.lexsort((position, -priority, ts, target))
    st, sts = target[order], ts[order]
    new = np.ones(order.shape[0], dtype=bool)
    new[1:] = (st[1:] != st[:-1]) | (sts[1:] != sts[:-1])
    group_start = np.flatnonzero(new)
    winner = order[group_start]
    first = np.minimum.reduceat(order, group_start)
    keep = winner[np.argsort(first, kind="stable")]
    place = np.sort(first)
    return target[place], ts[place], values[keep]


def _batch(targets: list[SeriesKey], target: np.ndarray, ts: np.ndarray, values: np.ndarray) -> SampleBatch:
    """The batch of rows (``target`` indexes ``targets``) with only the series used, in first-use order."""
    used, first = np.unique(target, return_index=True)
    used = used[np.argsort(first, kind="stable")]
    remap = np.empty(len(targets), dtype=np.uint32)
    remap[used] = np.arange(used.shape[0], dtype=np.uint32)
    return SampleBatch([targets[i] for i in used.tolist()], remap[target], ts, values)


def _empty() -> SampleBatch:
    return SampleBatch([], np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.float64))
