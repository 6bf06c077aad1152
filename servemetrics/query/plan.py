"""``Plan``: a validated metrics request, ready to execute (mode, window, value sets, metrics)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from servemetrics.catalog import CATALOG, DEFAULT_METRICS, MetricDef
from servemetrics.catalog.splits import Split
from servemetrics.query.drilldown import check_split
from servemetrics.query.errors import UnknownMetricError
from servemetrics.query.value_sets import serving_at, split_series, whole_window
from servemetrics.query.windows import Mode, Window, resolve_window
from servemetrics.store.base import GroupKey, ValueSet
from servemetrics.timeutil import Timeline
from servemetrics.types import Matchers


@dataclass(frozen=True)
class Plan:
    """What to compute.

    Attributes:
        model_id: the model whose series are read (a matcher on the ``model_id`` label).
        mode: CURRENT, SUMMARY or SERIES.
        window: the resolved window (epoch ms) and SERIES step.
        value_sets: the value sets, in time order, each with the deployments serving during it.
        metrics: catalog entries to answer, in the requested order (duplicates removed).
        group_by: the drill-down split (our extension, ``catalog.splits``); None: the spec's answer.
        matchers: more label equality matchers every metric's series must match (a Model API's
            ``model_api``); not the ``up`` series that tell 0 from null.
        parts: with ``group_by``, the only parts answered (split label values; None: every part present),
            e.g. the teams a key may see.
    """

    model_id: str
    mode: Mode
    window: Window
    value_sets: tuple[ValueSet, ...]
    metrics: tuple[MetricDef, ...]
    group_by: Split | None = None
    matchers: Matchers = ()
    parts: frozenset[GroupKey] | None = None


CustomOf = Callable[[str], MetricDef | None]
"""A name outside the catalog -> its custom metric's ``MetricDef``, or None (``query.custom``)."""


def resolve_metrics(
    names: Sequence[str] | None, custom_of: CustomOf | None = None, defaults: Sequence[str] = DEFAULT_METRICS
) -> tuple[MetricDef, ...]:
    """Catalog entries for ``names`` (``defaults`` when None or empty), order kept, duplicates dropped;
    a name outside the catalog is a custom metric when ``custom_of`` gives one.

    Raises:
        UnknownMetricError: naming every name that is neither.
    """
    wanted = list(dict.fromkeys(n.strip() for name in (names or ()) for n in name.split(",") if n.strip()))
    wanted = wanted or list(defaults)
    found = {n: CATALOG.get(n) or (custom_of(n) if custom_of is not None else None) for n in wanted}
    unknown = [n for n, m in found.items() if m is None]
    if unknown:
        raise UnknownMetricError(unknown)
    return tuple(m for m in found.values() if m is not None)


def build_plan(
    model_id: str,
    mode: Mode,
    start_ms: int | None,
    end_ms: int | None,
    metric_names: Sequence[str] | None,
    timeline_of: Callable[[int, int], Timeline],
    now_ms: int,
    group_by: Split | None = None,
    custom_of: CustomOf | None = None,
    *,
    matchers: Matchers = (),
    parts: frozenset[GroupKey] | None = None,
    defaults: Sequence[str] = DEFAULT_METRICS,
) -> Plan:
    """Validate a request and split its window into value sets.

    ``timeline_of(start_ms, end_ms)`` gives the serving timeline over ``[start_ms, end_ms)`` (epoch ms)
    of the environment (or ``[(start_ms, {deployment})]`` for one deployment; see ``value_sets``); it is
    called once, when the window is resolved. ``now_ms`` is now, epoch ms. ``custom_of``: custom metrics by
    name (``resolve_metrics``; None: catalog names only). ``group_by`` splits every metric
    (docs/query-semantics.md "Drill-down"); ``matchers``, ``parts``: as in ``Plan``; ``defaults``: the
    metrics answered when ``metric_names`` names none.

    Raises:
        WindowError: bad window (400).
        UnknownMetricError: unknown metric names (400).
        SplitError: a ``group_by`` that a requested metric does not accept (400).
    """
    metrics = resolve_metrics(metric_names, custom_of, defaults)
    check_split(metrics, group_by)
    window = resolve_window(mode, start_ms, end_ms, now_ms)
    timeline = timeline_of(window.start_ms, window.read_end_ms)
    if window.step_s is not None:
        value_sets = split_series(window.start_ms, window.end_ms, window.step_s, timeline)
    elif mode is Mode.CURRENT:
        # a snapshot of what serves now; the latest sample may carry the timestamp ``now`` itself
        value_sets = [ValueSet(window.start_ms, window.read_end_ms, serving_at(timeline, window.end_ms))]
    else:
        value_sets = whole_window(window.start_ms, window.end_ms, timeline)
    return Plan(model_id, mode, window, tuple(value_sets), metrics, group_by, matchers, parts)
