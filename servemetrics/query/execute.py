"""Execute a ``Plan`` against a ``Store``: the recipes of each metric kind and the null-vs-0 rules.

Recipes (DESIGN "Query semantics"; the store evaluates the per-series part, this module the rest):

- GAUGE: per-series MEAN in each value set (LAST within 5 min in CURRENT), then per ``Scope``:
  series are combined by the catalog's aggregation; DEPLOYMENT scope sums the series of one source and
  averages sources; REPLICA scope takes, per replica and value set, the most preferred source with data
  (``MetricDef.sources``: one container, one value) and sums that source's series. For both, the pieces
  of one series that a promotion relabelled (``rollout_phase``, ``environment``) are averaged, not summed.
- COUNTER: per-series INCREASE (resets count, no extrapolation), summed; PER_SECOND / RATIO metrics
  divide by the value set's seconds (REPLICA scope: per replica from its preferred source, as for
  gauges, then the aggregation across replicas).
- HISTOGRAM: INCREASE of every bucket summed per ``le`` (views with different bucket layouts merged
  at the union of their bounds, ``quantiles.merge_layouts``; REPLICA scope: one source per replica),
  quantiles by PromQL ``histogram_quantile`` rules (``quantiles.bucket_quantile``), ``avg`` = increase
  of ``_sum`` / increase of ``_count``.
- By-label metrics map the stored label to the catalog's label sets (``status_code`` 503 -> ``5xx``).
- Engine ranks (``MetricDef.ranks``): data-parallel ranks are series like any other (they add up);
  tensor / pipeline-parallel copies of one rank are averaged first (``_select``: counted once).
- Derived metrics (``MetricDef.derived``) are computed per value set from their inputs' recipes
  (``_derived``): Δa / Δb, Δa / seconds, 1 / a time-per-token histogram's avg and quantiles.
- No sample in a value set -> ``null``. For counters and histograms a value set in which a target of the
  serving deployments was up (``up`` == 1) but no sample of the metric exists reads 0 (counters) or
  ``null`` quantiles (histograms: no observations). A label set missing while others have data reads 0.
- A metric with no data in any value set is omitted from the response.
- ``Plan.group_by`` (drill-down, our extension; ``query.drilldown``): the recipe runs once per part
  present in the window (replica, GPU, deployment, exact status code), on that part's series alone
  (``_split``); the label sets then lead with the part's labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from servemetrics.catalog import CATALOG
from servemetrics.catalog.model import Aggregation, Formula, Kind, MetricDef, Scope, Unit
from servemetrics.labels import PHASE_LABELS, UP
from servemetrics.query import drilldown
from servemetrics.query.histograms import VIEW, Buckets, histogram_row, total
from servemetrics.query.plan import Plan
from servemetrics.query.series_keys import (
    KeyLayout,
    average_groups,
    one_request_source,
    preferred_source,
    status_class,
    sum_groups,
)
from servemetrics.query.windows import CURRENT_LOOKBACK_MS, Mode
from servemetrics.store.base import Cell, Reducer, Selection, SelectResult, Store
from servemetrics.types import Matchers

Rows = list[list[float | None]]
"""A recipe's answer: per value set, one value per label set of the metric (None: no value)."""

_SCOPE_KEYS: dict[Scope, tuple[str, ...]] = {
    Scope.SERIES: (),
    Scope.DEPLOYMENT: ("deployment_id", "source"),
    Scope.REPLICA: ("deployment_id", "replica", "source"),
}
"""The scope labels a recipe groups by; REPLICA keeps ``source`` until ``_preferred_source`` picks one."""


@dataclass(frozen=True)
class Descriptor:
    """One answered metric: catalog name, unit, kind and the label sets its values are aligned to."""

    name: str
    unit: Unit
    kind: Kind
    label_sets: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class ValueRow:
    """The values of the value set starting at ``start_ms`` (epoch ms): one tuple per descriptor, one
    value per label set (None: no value; never inf or NaN)."""

    start_ms: int
    values: tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class MetricsResult:
    """The answer to a ``Plan``: the window (epoch ms), mode and SERIES step (seconds, None in other
    modes), the metrics that have data (``descriptors``) and one ``ValueRow`` per value set."""

    start_ms: int
    end_ms: int
    mode: Mode
    step_s: int | None
    descriptors: tuple[Descriptor, ...]
    rows: tuple[ValueRow, ...]


def _label_value(metric: MetricDef, raw: str) -> str | None:
    if metric.by_label == "status_code":
        return status_class(raw)
    return raw.lower()


@dataclass
class _Context:
    plan: Plan
    store: Store
    live_cache: list[bool] | None = field(default=None)
    part: Matchers = ()
    """Drill-down: the matchers of the part being answered (``_split``); () for the whole."""

    def select(
        self,
        name: str,
        reducer: Reducer,
        group_by: tuple[str, ...] = (),
        part: Matchers | None = None,
        scoped: bool = True,
    ) -> SelectResult:
        """``store.select`` of the plan's model (and ``Plan.matchers`` unless not ``scoped``: the ``up``
        series carry none of them) and the part's matchers."""
        lookback = CURRENT_LOOKBACK_MS if reducer is Reducer.LAST else Selection.lookback_ms
        scope = self.plan.matchers if scoped else ()
        return self.store.select(
            Selection(
                name=name,
                reducer=reducer,
                value_sets=self.plan.value_sets,
                group_by=group_by,
                matchers=(("model_id", self.plan.model_id), *scope, *(self.part if part is None else part)),
                lookback_ms=lookback,
            )
        )

    def live(self) -> list[bool]:
        """Per value set: was any target of the serving deployments (of the part's replica or
        deployment, when split) up?"""
        if self.live_cache is None:
            part = tuple((k, v) for k, v in self.part if k in drilldown.LIVE_LABELS)
            up = self.select(UP, Reducer.MEAN, part=part, scoped=False)
            cells = up.get((), [None] * len(self.plan.value_sets))
            self.live_cache = [c is not None and c.total > 0 for c in cells]
        return self.live_cache

    def seconds(self, i: int) -> float:
        vs = self.plan.value_sets[i]
        end = min(vs.end_ms, self.plan.window.end_ms)
        return max(end - vs.start_ms, 1) / 1000.0


def _combine(values: list[float], counts: list[int], agg: Aggregation) -> float:
    if agg is Aggregation.SUM:
        return math.fsum(values)
    return math.fsum(values) / sum(counts)


def _by_label_set(
    ctx: _Context,
    metric: MetricDef,
    res: SelectResult,
    layout: KeyLayout,
    unit: Callable[[int, Cell], float],
    pooled: bool,
) -> Rows:
    """Reduce a select result (keys laid out as ``layout``) to per value set, per label set values.

    ``unit(i, cell)`` turns one group's cell into one unit value (a deployment's or a replica's);
    ``pooled`` keeps series counts so MEAN aggregates over series rather than over units. A group whose
    label value maps to no label set (a status code outside 2xx / 4xx / 5xx, an absent label) counts as
    data but adds to no label set.
    """
    index = {next(iter(ls.values()), ""): j for j, ls in enumerate(metric.label_sets)}
    out: Rows = []
    for i in range(len(ctx.plan.value_sets)):
        acc: list[tuple[list[float], list[int]]] = [([], []) for _ in metric.label_sets]
        any_data = False
        for key, cells in res.items():
            cell = cells[i]
            if cell is None:
                continue
            j: int | None = 0
            if metric.by_label:
                value = _label_value(metric, key[layout.by_label_index])
                j = index.get(value) if value else None
            any_data = True
            if j is None:
                continue
            acc[j][0].append(unit(i, cell))
            acc[j][1].append(cell.series if pooled else 1)
        row: list[float | None] = []
        for vals, counts in acc:
            if vals:
                row.append(_combine(vals, counts, metric.aggregation))
            else:
                row.append(0.0 if any_data and metric.by_label else None)
        out.append(row)
    return out


_RANK_UNIT = ("deployment_id", "replica", "source")
"""With the data-parallel rank labels, what one engine rank is (``_select``)."""


def _select(
    ctx: _Context, metric: MetricDef, name: str, reducer: Reducer, group_by: tuple[str, ...] = ()
) -> SelectResult:
    """``ctx.select`` with the catalog's rank rule (``MetricDef.ranks``): when the metric has rank
    copies (tensor / pipeline ranks repeating one value), the copies of one rank unit (replica, source,
    data-parallel ranks) are averaged, each unit counts as one series, then units are summed per
    ``group_by`` key. Without copies every series is a unit already (data-parallel ranks add up)."""
    copies = metric.ranks.copies
    if not copies:
        return ctx.select(name, reducer, group_by)
    unit = KeyLayout(group_by + tuple(n for n in _RANK_UNIT + metric.ranks.parallel if n not in group_by))
    full = KeyLayout(unit.scope + copies)
    res = ctx.select(name, reducer, full.labels)
    if not res:
        return res
    return sum_groups(average_groups(res, full.project(unit)), unit.project(KeyLayout(group_by)))


def _gauge(ctx: _Context, metric: MetricDef) -> Rows | None:
    """Gauges, in two averaging steps before the cross-series aggregation:

    - the pieces of one series that a promotion relabelled (``rollout_phase`` stable -> promoting ->
      stable, ``environment``) are averaged: one replica's or deployment's gauge, split over time;
    - DEPLOYMENT scope: the series of one source are summed (per-replica series of one exporter add up)
      by the store, then the sources of one deployment are averaged (copies are never summed);
    - REPLICA scope: the series of one source are summed by the store (the containers of a replica),
      then each replica takes its most preferred source with data (``_preferred_source``).
    """
    reducer = Reducer.LAST if ctx.plan.mode is Mode.CURRENT else Reducer.MEAN
    phases = PHASE_LABELS if metric.scope is not Scope.SERIES else ()
    layout = KeyLayout(_SCOPE_KEYS[metric.scope], phases, metric.by_label)
    res = _select(ctx, metric, metric.name, reducer, layout.labels)
    if not res:
        return None
    if phases:
        merged = layout.dropping(*phases)
        res, layout = average_groups(res, layout.project(merged)), merged
    if metric.scope is Scope.DEPLOYMENT:
        one = layout.dropping("source")
        res, layout = average_groups(res, layout.project(one)), one
    if metric.scope is Scope.REPLICA:
        res, layout = preferred_source(res, layout, metric)
    return _by_label_set(ctx, metric, res, layout, lambda i, c: c.total, pooled=metric.scope is Scope.SERIES)


def _counter(ctx: _Context, metric: MetricDef) -> Rows | None:
    scope = ("deployment_id", "source") if metric.request_sources else _SCOPE_KEYS[metric.scope]
    layout = KeyLayout(scope, by_label=metric.by_label)
    res = _select(ctx, metric, metric.name, Reducer.INCREASE, layout.labels)
    if not res:
        return None
    if metric.scope is Scope.REPLICA:
        res, layout = preferred_source(res, layout, metric)
    if metric.request_sources:
        res, layout = one_request_source(res, layout, metric)
    per_second = metric.per_second
    rows = _by_label_set(
        ctx,
        metric,
        res,
        layout,
        lambda i, c: c.total / ctx.seconds(i) if per_second else c.total,
        pooled=False,
    )
    live = ctx.live()
    return [[0.0 if v is None and live[i] else v for v in row] for i, row in enumerate(rows)]


def _histogram(ctx: _Context, metric: MetricDef) -> Rows | None:
    """Per value set, the buckets with data there summed per ``le`` when they are of one layout (the
    usual case, read grouped by ``le`` alone); when layouts differ (a vLLM and an SGLang replica, two
    engine versions) each view (``histograms.VIEW``) is read at the union of bounds and those add up
    (``quantiles.merge_layouts``), never a per-``le`` sum of different layouts. Only the buckets with data
    in a value set take part in it: a bucket layout that another series (or an older version of the same
    one) used elsewhere in the window must not add empty buckets. REPLICA scope (``baseten_llm_*``): one
    source per replica (the native series over an engine's adapted one), for the buckets, ``_sum`` and
    ``_count`` alike, so always read per view; so are metrics with ``request_sources`` (one source per
    deployment) whose buckets come from several sources in the window (``_coarse``)."""
    name = metric.name + "_bucket"
    coarse = None if metric.scope is Scope.REPLICA else _coarse(ctx, metric, name)
    if coarse is not None and not coarse.bounds:
        return None
    fine: Buckets | None = None
    by = VIEW if coarse is None else ()
    sums = _select(ctx, metric, metric.name + "_sum", Reducer.INCREASE, by)
    counts = _select(ctx, metric, metric.name + "_count", Reducer.INCREASE, by)
    out: Rows = []
    for i in range(len(ctx.plan.value_sets)):
        present = coarse.one_layout(i) if coarse is not None else None
        keys = None
        if present is None:
            if fine is None:
                fine = Buckets(_select(ctx, metric, name, Reducer.INCREASE, ("le", *VIEW)))
                if not fine.bounds:
                    return None
            present, keys = fine.merged(i, metric)
            if coarse is not None:
                keys = None  # one source (``_coarse``): every view is used, ``_sum`` / ``_count`` read whole
        out.append(
            histogram_row(present, total(sums, i, keys), total(counts, i, keys), len(metric.label_sets))
        )
    return out


def _coarse(ctx: _Context, metric: MetricDef, name: str) -> Buckets | None:
    """The ``_bucket`` series ``name`` grouped by ``le`` (and ``source``, which a metric with
    ``request_sources`` needs to know), or None when that metric's buckets come from several sources in
    the window: then one per deployment is read, per view (``histograms.preferred_views``)."""
    if not metric.request_sources:
        return Buckets(_select(ctx, metric, name, Reducer.INCREASE, ("le",)))
    res = _select(ctx, metric, name, Reducer.INCREASE, ("le", "source"))
    return Buckets(res) if len({key[1] for key in res}) <= 1 else None


def _speed_inputs(metric: MetricDef, source: MetricDef) -> list[int]:
    """``Formula.INVERSE``: per label set of ``metric``, the index of the time-per-token label set whose
    inverse it is (``{stat: avg}`` -> ``{stat: avg}``, ``{quantile: q}`` -> ``{quantile: 1 - q}``)."""
    out = []
    for ls in metric.label_sets:
        want = ls if "stat" in ls else {"quantile": f"{1 - float(ls['quantile']):g}"}
        out.append(source.label_sets.index(want))
    return out


def _inverse(v: float | None) -> float | None:
    return 1.0 / v if v is not None and v > 0 else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


def _derived(ctx: _Context, metric: MetricDef) -> Rows | None:
    """A derived metric (``MetricDef.derived``) from its inputs' own recipes, per value set: ratios of
    increases, increases per second, the inverse of a time-per-token histogram's mean and quantiles."""
    assert metric.derived is not None
    got: list[Rows] = []
    for m in (CATALOG[n] for n in metric.derived.inputs):
        rows = _RECIPES[m.kind](ctx, m)
        if rows is None:
            return None
        got.append(rows)
    first = [r[0] for r in got[0]]
    formula = metric.derived.formula
    if formula is Formula.INVERSE:
        at = _speed_inputs(metric, CATALOG[metric.derived.inputs[0]])
        return [[_inverse(row[j]) for j in at] for row in got[0]]
    if formula is Formula.RATE:
        return [[v / ctx.seconds(i) if v is not None else None] for i, v in enumerate(first)]
    second = [r[0] for r in got[1]]
    ratios = [_ratio(a, b) for a, b in zip(first, second, strict=True)]
    if formula is Formula.ONE_PLUS_RATIO:
        return [[1.0 + r if r is not None else None] for r in ratios]
    return [[r] for r in ratios]


_RECIPES: dict[Kind, Callable[[_Context, MetricDef], Rows | None]] = {
    Kind.GAUGE: _gauge,
    Kind.COUNTER: _counter,
    Kind.HISTOGRAM: _histogram,
}
"""Kind -> recipe; a test keeps it complete for every kind in the catalog."""


def _finite(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


def _answer(ctx: _Context, metric: MetricDef) -> Rows | None:
    return (_derived if metric.derived else _RECIPES[metric.kind])(ctx, metric)


def _split(ctx: _Context, metric: MetricDef) -> tuple[tuple[dict[str, str], ...], Rows] | None:
    """Drill-down: the label sets and rows of ``metric`` split by ``plan.group_by``, one run of its
    recipe per part present in the window, each on the part's series alone; parts side by side."""
    split = ctx.plan.group_by
    assert split is not None
    name, reducer = drilldown.probe(metric, ctx.plan.mode is Mode.CURRENT)
    found = ctx.select(name, reducer, drilldown.split_labels(split))
    label_sets: list[dict[str, str]] = []
    parts: list[Rows] = []
    one = drilldown.part_metric(metric, split)
    for key in drilldown.present_parts(found, split):
        if ctx.plan.parts is not None and key not in ctx.plan.parts:
            continue
        rows = _answer(_Context(ctx.plan, ctx.store, part=drilldown.part_matchers(split, key)), one)
        if rows is not None and any(v is not None for row in rows for v in row):
            label_sets.extend(drilldown.part_label_sets(metric, split, key))
            parts.append(rows)
    if not parts:
        return None
    return tuple(label_sets), [[v for p in parts for v in p[i]] for i in range(len(ctx.plan.value_sets))]


def execute(plan: Plan, store: Store) -> MetricsResult:
    """Answer ``plan`` from ``store``: the metrics with data, in the plan's order, and per value set their
    values (inf and NaN read None). The rules are in the module docstring; ``api.schemas`` turns the result
    into ``GetModelMetricsResponseV1``."""
    ctx = _Context(plan, store)
    descriptors: list[Descriptor] = []
    columns: list[Rows] = []
    for metric in plan.metrics:
        label_sets, rows = metric.label_sets, None
        if plan.group_by is None:
            rows = _answer(ctx, metric)
        elif (got := _split(ctx, metric)) is not None:
            label_sets, rows = got
        if rows is None:
            continue
        descriptors.append(Descriptor(metric.name, metric.unit, metric.kind, label_sets))
        columns.append(rows)
    value_rows = tuple(
        ValueRow(vs.start_ms, tuple(tuple(_finite(v) for v in col[i]) for col in columns))
        for i, vs in enumerate(plan.value_sets)
    )
    return MetricsResult(
        plan.window.start_ms,
        plan.window.end_ms,
        plan.mode,
        plan.window.step_s,
        tuple(descriptors),
        value_rows,
    )
