"""What ``GET /metrics`` exports for one organization: ``build_snapshot`` reads it from the store.

The export is the platform's (platform-facts §1, §2): every stored catalog metric (``catalog.CATALOG``,
derived rows left out: they are computed, not stored) of the organization's models, one exported series
per stored label set, with the platform's labels and export units:

- **gauges**: each series' latest sample of the last 5 minutes (``CURRENT_LOOKBACK_MS``, as the API's
  CURRENT), multiplied by ``EXPORT_SCALE`` (``baseten_gpu_utilization``: stored as a 0-1 ratio, exported
  in percent 0-100 as the platform does; the API keeps the ratio).
- **counters**: the series' accumulated increase over every sample the store holds, under the counter
  rules of DESIGN "counter in a step" (a replica restart, i.e. a counter reset, adds the new value; a
  gap longer than ``COUNTER_GAP_MS`` adds nothing). So an exported total never goes down while the
  store keeps the samples (our own restarts included: it is recomputed from the store), and equals the
  API's SUMMARY over a window that spans them. Retention dropping a series' oldest samples lowers it
  (a Prometheus ``rate`` reads that as a reset).
- **histograms**: ``_bucket`` (per ``le``) / ``_sum`` / ``_count`` as counters, the same way.

The ``source`` label (who reported a copy) is internal: dropping it merges copies the way the API does
(DESIGN "Query semantics"): a DEPLOYMENT-scope gauge averages its sources, a REPLICA-scope metric takes
its most preferred source, a request metric (``MetricDef.request_sources``) exports per deployment only
its most preferred source with series (the gateway's over a replica's own count of the same requests,
docs/query-semantics.md "One count of a deployment's requests"), any other metric sums them. Labels
kept: ``EXPORT_LABELS``, the metric's ``by_label`` and its rank labels (vLLM ``engine``, SGLang
``dp_rank`` ...), each only when not empty (``DEPLOYMENT_LABELS`` always: the platform exports
``environment`` / ``rollout_phase`` empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from servemetrics.catalog import CATALOG, Kind, MetricDef, Scope
from servemetrics.labels import DEPLOYMENT_LABELS, TARGET_LABELS
from servemetrics.query.quantiles import parse_le
from servemetrics.query.windows import CURRENT_LOOKBACK_MS
from servemetrics.store.base import Reducer, Selection, SelectResult, Store, ValueSet

EXPORT_LABELS: tuple[str, ...] = (*TARGET_LABELS, "gpu", "status_code", "is_async")
"""The platform's labels (platform-facts §1 label sets REQ, DEP, REP, GPU) an exported series keeps."""
EXPORT_SCALE: dict[str, float] = {"baseten_gpu_utilization": 100.0}
"""Stored value x factor = exported value (platform-facts §1: GPU utilisation is exported in percent)."""
SOURCE = "source"
LabelPairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ExportedSeries:
    """One exported series: its labels, its value (a histogram: ``_sum``), and for a histogram its
    cumulative ``(le, count)`` buckets in ``le`` order (the last ``+Inf``) and ``_count``."""

    labels: LabelPairs
    value: float
    buckets: tuple[tuple[str, float], ...] = ()
    count: float = 0.0

    @property
    def model_id(self) -> str:
        """The series' ``model_id`` label."""
        return dict(self.labels).get("model_id", "")


@dataclass(frozen=True)
class ExportedFamily:
    """The exported series of one catalog metric."""

    metric: MetricDef
    series: tuple[ExportedSeries, ...]


@dataclass(frozen=True)
class Snapshot:
    """An organization's export at ``built_ms`` (epoch ms): one family per catalog metric with data."""

    built_ms: int
    families: tuple[ExportedFamily, ...]


def exported_metrics() -> tuple[MetricDef, ...]:
    """The catalog metrics the export reads from the store (every stored one: derived rows are not)."""
    return tuple(m for m in CATALOG.values() if m.derived is None)


def _group_labels(metric: MetricDef) -> tuple[str, ...]:
    extra = (metric.by_label or "", *metric.ranks.parallel, *metric.ranks.copies, SOURCE)
    return tuple(dict.fromkeys(n for n in (*EXPORT_LABELS, *extra) if n))


@dataclass(frozen=True)
class _Reader:
    """Selections over one organization's series: ``deployments`` is model id -> its deployment ids."""

    store: Store
    deployments: Mapping[str, frozenset[str]]
    now_ms: int

    def select(self, name: str, reducer: Reducer, group_by: tuple[str, ...]) -> SelectResult:
        """``name`` per ``group_by`` key (``model_id`` and ``deployment_id`` first) of the org only."""
        every = frozenset().union(*self.deployments.values())
        start = self.now_ms - CURRENT_LOOKBACK_MS if reducer is Reducer.LAST else 0
        selection = Selection(
            name,
            reducer,
            (ValueSet(max(0, start), self.now_ms, every),),
            group_by,
            lookback_ms=CURRENT_LOOKBACK_MS,
        )
        return {
            key: cells
            for key, cells in self.store.select(selection).items()
            if key[2] in self.deployments.get(key[0], frozenset())
        }


def _labels(names: tuple[str, ...], key: tuple[str, ...]) -> tuple[LabelPairs, str]:
    """``(exported labels, source)`` of a group key over ``names``."""
    pairs = dict(zip(names, key, strict=True))
    source = pairs.pop(SOURCE, "")
    kept = tuple((k, v) for k, v in pairs.items() if v or k in DEPLOYMENT_LABELS)
    return kept, source


def _merge(metric: MetricDef, copies: list[tuple[str, float]]) -> float:
    """One value from the ``(source, value)`` copies of one exported series (module docstring)."""
    if metric.scope is Scope.REPLICA:
        return min(copies, key=lambda c: metric.source_rank(c[0]))[1]
    values = [v for _, v in copies]
    if metric.scope is Scope.DEPLOYMENT and metric.kind is Kind.GAUGE:
        return sum(values) / len(values)
    return sum(values)


def _one_request_source(res: SelectResult, names: tuple[str, ...], metric: MetricDef) -> SelectResult:
    """The groups of ``res`` (keys over ``names``) of each deployment's most preferred request source
    with series (``MetricDef.request_sources``; ties by name)."""
    dep, at = names.index("deployment_id"), names.index(SOURCE)
    best: dict[str, tuple[int, str]] = {}
    for key in res:
        rank = (metric.source_rank(key[at]), key[at])
        best[key[dep]] = min(best.get(key[dep], rank), rank)
    return {key: cells for key, cells in res.items() if best[key[dep]][1] == key[at]}


def _values(
    reader: _Reader, metric: MetricDef, name: str, extra: tuple[str, ...] = ()
) -> dict[LabelPairs, float]:
    """Exported labels (with ``extra`` labels such as ``le``) -> value of stored series ``name``."""
    names = (*_group_labels(metric), *extra)
    gauge = metric.kind is Kind.GAUGE
    copies: dict[LabelPairs, list[tuple[str, float]]] = {}
    res = reader.select(name, Reducer.LAST if gauge else Reducer.INCREASE, names)
    if metric.request_sources:
        res = _one_request_source(res, names, metric)
    for key, cells in res.items():
        cell = cells[0]
        if cell is None and gauge:
            continue  # no sample in the last 5 minutes (or a stale marker): not exported
        labels, source = _labels(names, key)
        copies.setdefault(labels, []).append((source, 0.0 if cell is None else cell.total))
    scale = EXPORT_SCALE.get(metric.name, 1.0)
    return {labels: _merge(metric, c) * scale for labels, c in copies.items()}


def _histogram(reader: _Reader, metric: MetricDef) -> tuple[ExportedSeries, ...]:
    """``_bucket`` / ``_sum`` / ``_count`` per label set; ``_count`` falls back to the ``+Inf`` bucket."""
    buckets: dict[LabelPairs, list[tuple[float, str, float]]] = {}
    for labels, value in _values(reader, metric, metric.name + "_bucket", ("le",)).items():
        le = labels[-1][1]  # ``le`` is the last group label and never empty
        try:
            bound = parse_le(le)
        except ValueError:
            continue  # ingest refuses such buckets; one stored earlier must not break the export
        buckets.setdefault(labels[:-1], []).append((bound, le, value))
    sums = _values(reader, metric, metric.name + "_sum")
    counts = _values(reader, metric, metric.name + "_count")
    out = []
    for labels, found in buckets.items():
        found.sort()
        count = counts.get(labels, found[-1][2])
        ordered = [(le, v) for bound, le, v in found if bound != float("inf")] + [("+Inf", count)]
        out.append(ExportedSeries(labels, sums.get(labels, 0.0), tuple(ordered), count))
    return tuple(out)


def build_snapshot(store: Store, deployments: Mapping[str, frozenset[str]], now_ms: int) -> Snapshot:
    """The export of the models ``deployments`` names (model id -> its deployment ids) at ``now_ms``
    (epoch ms), read from ``store`` as the module docstring says; families without series are left out.

    Raises:
        StoreUnavailableError: the store's engine is down (the route answers 503).
    """
    reader = _Reader(store, deployments, now_ms)
    families = []
    for metric in exported_metrics() if deployments else ():
        if metric.kind is Kind.HISTOGRAM:
            series = _histogram(reader, metric)
        else:
            values = _values(reader, metric, metric.name)
            series = tuple(ExportedSeries(labels, v) for labels, v in values.items())
        if series:
            families.append(ExportedFamily(metric, series))
    return Snapshot(now_ms, tuple(families))
