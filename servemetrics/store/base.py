"""The sample store interface (``Store``) and the selection it evaluates.

Modelled on Prometheus ``Appendable`` / ``Queryable``: the store appends columnar sample batches and
evaluates one narrow kind of question, a ``Selection``: one series name, label equality matchers, a
per-series reducer (increase, mean or last) evaluated in every value set, summed per group.
Everything above the store (query planner, API) knows nothing of the backend.

Semantics every backend must meet (DESIGN "Query semantics"; ``MemoryStore`` is the reference):

- A series takes part in value set ``v`` only if its ``deployment_id`` label is in ``v.deployment_ids``
  and it matches every matcher.
- ``MEAN``: mean of the series' samples with ``v.start_ms <= ts < v.end_ms``.
- ``LAST``: the series' latest sample with ``v.end_ms - lookback_ms <= ts < v.end_ms``.
- ``INCREASE`` (DESIGN "counter in a step"; docs/query-semantics.md "Counters across scrapes"): for
  each pair of consecutive samples (t0, v0), (t1, v1) of the series at most ``COUNTER_GAP_MS`` apart, the
  delta ``v1 - v0`` (``v1`` after a drop: a reset) is spread evenly over ``(t0, t1]`` and ``v`` receives
  the part that falls inside ``[v.start_ms, v.end_ms)``. A pair further apart is a gap: when ``v1 < v0``
  the counter was re-created during it and ``v1`` counts at ``t1`` (a point); otherwise nothing. So the
  result depends on the pair only, never on where a value set starts: SUMMARY = sum of SERIES. No
  extrapolation past the first or last sample.
- Stale markers (``samples.STALE_NAN``, Prometheus' bit pattern; any NaN in a store is one), written by
  the scraper when a series leaves a target that is still scraped: no value. MEAN and INCREASE skip
  them (a counter continues across them: gaps are not resets); LAST gives no data when the latest
  sample in its range is a marker.
- A series "has data" in ``v``: MEAN, a sample (not a marker) in ``[start, end)``; LAST, a latest
  sample that is not a marker; INCREASE, a pair whose ``(t0, t1]`` overlaps ``v`` (also a 30 s step
  between two samples of a 60 s scrape; not a pair that ends on ``v.start_ms``) or a re-created
  counter's point above 0 in it. A lone sample, or the last one of a window with no pair after it,
  gives INCREASE no data (its rate there is unknown: null, not 0). Series without data are left out
  of the group's cell.
- Result: for each group (the values of ``group_by`` labels, "" when absent) a list with one entry per
  value set: ``Cell(total, series)`` = sum of the per-series results and the number of series with data,
  or ``None`` when no series of the group has data there. Every group with at least one matching series
  whose ``deployment_id`` is in any value set appears, even when all its cells are ``None`` (so callers
  can tell "no such series" (omit the metric) from "no sample in the window" (null)).
- A sample appended for a series and timestamp already stored is ignored (first write wins).
- ``label_values(name, label, matchers)``: the sorted distinct values of one label over the stored series
  named ``name`` that match every matcher; series without the label, or with an empty value (absent, as
  Prometheus treats it), are skipped. No time range: every
  series the store holds counts. A series retention left without samples is no longer held
  (``delete_before`` drops it: MemoryStore and DuckDBStore forget it, as Prometheus' head does), so it is
  not listed; appended again later it is a new series. Like Prometheus
  ``GET /api/v1/label/<label>/values?match[]=<name>{<matchers>}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, Protocol, runtime_checkable

from servemetrics.samples import SampleBatch
from servemetrics.types import Matchers

DEFAULT_LOOKBACK_MS = 10 * 60 * 1000
"""LAST looks this far before a value set's end for a series' latest sample (10 minutes)."""

COUNTER_GAP_MS = 10 * 60 * 1000
"""Two consecutive samples of a counter further apart than this (10 minutes) are a gap, not a pair
(``INCREASE``); at most ``duckdb_schema.ROLLUP_MS`` (a test keeps it so)."""


class Reducer(StrEnum):
    """Per-series reduction inside one value set."""

    INCREASE = "increase"
    MEAN = "mean"
    LAST = "last"


@dataclass(frozen=True)
class ValueSet:
    """A half-open time range ``[start_ms, end_ms)`` and the deployments that serve during it."""

    start_ms: int
    end_ms: int
    deployment_ids: frozenset[str]


@dataclass(frozen=True)
class Selection:
    """One question to the store.

    Attributes:
        name: stored series name (``baseten_inference_requests_total``, ``..._bucket``, ``up`` ...).
        reducer: per-series reduction.
        value_sets: the ranges to evaluate, in order.
        group_by: label names kept in the result key (e.g. ``("le",)``); series are summed per group.
        matchers: label equality matchers, e.g. ``(("model_id", "m1"),)``.
        lookback_ms: LAST: how far before a value set's end the latest sample may be (INCREASE pairs
            samples at most ``COUNTER_GAP_MS`` apart, whatever this says).
    """

    name: str
    reducer: Reducer
    value_sets: tuple[ValueSet, ...]
    group_by: tuple[str, ...] = ()
    matchers: Matchers = ()
    lookback_ms: int = DEFAULT_LOOKBACK_MS


class Cell(NamedTuple):
    """Sum of the per-series results of one group in one value set, and how many series had data."""

    total: float
    series: int


GroupKey = tuple[str, ...]
SelectResult = dict[GroupKey, list[Cell | None]]


@dataclass
class StoreStats:
    """What a store holds: ``series`` and ``samples`` counts, ``bytes`` on disk (0 when in memory)."""

    series: int = 0
    samples: int = 0
    bytes: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class Store(Protocol):
    """A sample store. Implementations: ``MemoryStore`` (reference), ``DuckDBStore``."""

    def append(self, batch: SampleBatch) -> int:
        """Store a batch; return the number of samples newly stored (duplicates are dropped)."""
        ...

    def select(self, selection: Selection) -> SelectResult:
        """Evaluate ``selection``; see the module docstring for the exact semantics."""
        ...

    def delete_before(self, ts_ms: int) -> int:
        """Drop samples older than ``ts_ms`` (retention), and the series left without samples; return how
        many samples were dropped."""
        ...

    def label_values(self, name: str, label: str, matchers: Matchers = ()) -> list[str]:
        """Sorted distinct values of ``label`` over the stored series ``name`` matching every matcher
        (label equality, as in ``Selection.matchers``); ``[]`` when none. See the module docstring."""
        ...

    def stats(self) -> StoreStats:
        """Counts of series and samples, and bytes on disk."""
        ...

    def close(self) -> None:
        """Flush and release resources; the store is unusable afterwards."""
        ...


@runtime_checkable
class SelfMonitored(Protocol):
    """Optional beside ``Store``: a store that reports its own counters for the service's ``/metrics``
    (``PrometheusStore``: remote_write samples queued, sent, failed, retries, buffer bytes)."""

    def remote_write_stats(self) -> dict[str, float]:
        """The counters by name (``selfmetrics.REMOTE_WRITE_METRICS``)."""
        ...


def in_value_set(deployment_id: str | None, vs: ValueSet) -> bool:
    """True when a series with this ``deployment_id`` label takes part in ``vs``."""
    return deployment_id is not None and deployment_id in vs.deployment_ids


def check_value_sets(value_sets: Sequence[ValueSet]) -> None:
    """Raise ``ValueError`` unless every value set has ``start_ms < end_ms``."""
    for vs in value_sets:
        if vs.start_ms >= vs.end_ms:
            raise ValueError(f"value set must have start_ms < end_ms, got {vs.start_ms} >= {vs.end_ms}")
