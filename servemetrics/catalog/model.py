"""The shape of one catalog entry (``MetricDef``) and the enums it uses.

Kinds and unit hints are the spec's enums (``ModelMetricKindV1``, ``ModelMetricUnitHintV1`` in
``metrics-api.openapi.json``), the unit hints with the platform's later ``CELSIUS`` (its SDK's
``ModelMetricUnitHintV1``, PyPI ``baseten`` 0.13.1, issue 14), which the spec's enum predates.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """How a metric behaves (spec ``ModelMetricKindV1``)."""

    GAUGE = "GAUGE"
    COUNTER = "COUNTER"
    HISTOGRAM = "HISTOGRAM"


class Unit(StrEnum):
    """Advisory unit of the values the API returns (spec ``ModelMetricUnitHintV1``; ``CELSIUS``, degrees
    Celsius, and ``WATTS`` from the platform's SDK enum ``ModelMetricDescriptor.unit_hint``: the spec's
    has no temperature or power unit)."""

    PER_SECOND = "PER_SECOND"
    SECONDS = "SECONDS"
    BYTES = "BYTES"
    MEBIBYTES = "MEBIBYTES"
    COUNT = "COUNT"
    RATIO = "RATIO"
    CELSIUS = "CELSIUS"
    WATTS = "WATTS"


class Aggregation(StrEnum):
    """How per-series values of one step combine across series (DESIGN "Query semantics")."""

    SUM = "sum"
    MEAN = "mean"


class Scope(StrEnum):
    """Who reports one series of the metric.

    - ``SERIES``: every series counts (per-replica and per-GPU metrics, request counters).
    - ``DEPLOYMENT``: one value per deployment (DESIGN: never sum copies reported by several sources):
      the series of one source (``source`` label) are summed, the sources of a deployment averaged,
      then ``aggregation`` combines deployments.
    - ``REPLICA``: one value per replica (``replica`` label), from one source: per replica and value set
      the most preferred ``source`` with data there (``MetricDef.sources``; cAdvisor over kubelet
      ``/metrics/resource`` over the process's own, which all describe the same container: never summed
      or averaged across sources); the series of that source are summed (several containers of one
      replica add up), then ``aggregation`` combines replicas (CPU cores, working set).
    """

    SERIES = "series"
    DEPLOYMENT = "deployment"
    REPLICA = "replica"


QUANTILES: tuple[str, ...] = ("0.5", "0.9", "0.95", "0.99")
HISTOGRAM_LABEL_SETS: tuple[dict[str, str], ...] = tuple({"quantile": q} for q in QUANTILES) + (
    {"stat": "avg"},
)
STATUS_LABEL_SETS: tuple[dict[str, str], ...] = ({"status": "2xx"}, {"status": "4xx"}, {"status": "5xx"})
PLAIN_LABEL_SETS: tuple[dict[str, str], ...] = ({},)
SPEED_LABEL_SETS: tuple[dict[str, str], ...] = ({"stat": "avg"}, {"quantile": "0.5"}, {"quantile": "0.01"})
"""Label sets of a speed derived from a time-per-token histogram (``Formula.INVERSE``): the mean speed
(``avg``, as the histograms' ``{stat: avg}``), the median and the slow tail p1 (as their quantiles: the
q quantile of a speed is 1 / the 1 - q quantile of the time per token)."""


@dataclass(frozen=True)
class Ranks:
    """How the parallel ranks of one engine replica combine (a series label per rank).

    Attributes:
        parallel: labels of data-parallel ranks (vLLM ``engine``, SGLang ``dp_rank``): each serves its
            own requests, so its series is one more unit (summed by a ``sum`` aggregation, one more term
            of a ``mean``).
        copies: labels of tensor / pipeline-parallel ranks (SGLang ``tp_rank``, ``pp_rank``): they
            repeat one value, so per replica, data-parallel rank and step the copies are averaged
            (counted once), never summed.
    """

    parallel: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()


NO_RANKS = Ranks()


class Formula(StrEnum):
    """How a derived metric is computed from the catalog metrics it names (``Derived.inputs``), per
    value set, from the same per-kind combination as the inputs (never a mean of per-sample rates)."""

    INVERSE = "inverse"
    """1 / a time-per-token histogram: ``{stat: avg}`` = Δcount / Δsum (1 / mean), ``{quantile: q}`` =
    1 / its ``1 - q`` quantile (median = 1 / p50, p1 = 1 / p99)."""
    RATE = "rate"
    """Δcounter / the value set's seconds."""
    RATIO = "ratio"
    """Δfirst counter / Δsecond counter (null when the second did not increase)."""
    ONE_PLUS_RATIO = "one_plus_ratio"
    """1 + Δfirst / Δsecond (mean acceptance length: the bonus token plus accepted per draft)."""


@dataclass(frozen=True)
class Derived:
    """A metric computed from other catalog metrics: ``formula`` over ``inputs`` (catalog names)."""

    formula: Formula
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class MetricDef:
    """One canonical metric.

    Attributes:
        name: canonical series name as stored and as the API names it (``baseten_*``).
        kind: GAUGE, COUNTER or HISTOGRAM.
        unit: unit hint of the values the API returns (after any conversion at ingest).
        aggregation: cross-series aggregation of one step (sum or mean).
        help: one-line description.
        scope: see ``Scope``.
        by_label: for a by-label metric, the stored label whose values choose the label set
            (``status_code`` -> ``{status: 2xx}``; ``condition`` -> ``{condition: true}``); None otherwise.
        label_sets: the fixed label sets of the descriptor, in order.
        panel: title of the dashboard graph that draws this metric ("Replicas"); metrics with the same
            panel share one graph, panels come in the order of their first metric in ``CATALOG``;
            "" = not graphed (rows outside ``CATALOG``, e.g. trainer series).
        legend: name of this metric's line inside a panel of several metrics ("Desired"); "" when the
            panel has one metric (its lines are then named by the label sets).
        default_visible: True when the graph is shown before the user customises the view (the spec
            page's graphs); False for graphs listed hidden in "Customize view" (engine metrics,
            websocket connections, pod readiness).
        ranks: how an engine's parallel ranks combine (``Ranks``); ``NO_RANKS`` for the rest.
        derived: for a derived metric, its formula and inputs (``Derived``); None for a stored series.
        group: the dashboard's group of panels this metric's graph sits in, under a heading ("Engine":
            vLLM / SGLang native graphs; "LLM": token throughput, token speed, cache hit rate,
            acceptance rate); "" for the platform's graphs (no heading, first). Groups come in the order
            of their first metric in ``CATALOG``. Which deployments a metric applies to follows from its
            name (``catalog.detection.engines_of``), not from the group.
        sources: for a REPLICA-scope metric, the ``source`` labels of its views of one replica, most
            preferred first (``source_rank``). This is the one statement of the order: the query layer
            reads it, the adapter table's ``Rule.preference`` column (which the recording rules compile)
            is held to it by a test.
        request_sources: for a request metric counted both by the gateway and by replicas (a custom
            server's, Knative's queue-proxy's request counter and latency histogram), the ``source``
            labels that count one deployment's requests, most preferred first (``""``: the gateway's own
            series, or a replica exporting the canonical name). Per deployment and value set the query
            reads the most preferred source with data there and only it: the same requests are never
            counted twice (docs/query-semantics.md "One count of a deployment's requests"). A test holds
            the adapter table's sources of the metric to this list.
    """

    name: str
    kind: Kind
    unit: Unit
    aggregation: Aggregation
    help: str
    scope: Scope = Scope.SERIES
    by_label: str | None = None
    label_sets: tuple[dict[str, str], ...] = PLAIN_LABEL_SETS
    panel: str = ""
    legend: str = ""
    default_visible: bool = False
    sources: tuple[str, ...] = ()
    request_sources: tuple[str, ...] = ()
    ranks: Ranks = NO_RANKS
    derived: Derived | None = None
    group: str = ""

    def source_rank(self, source: str) -> int:
        """Position of ``source`` in ``sources`` (or ``request_sources``; 0: the most preferred); a source
        not listed (none, a replica exposing the canonical name itself) ranks after every listed one."""
        order = self.sources or self.request_sources
        return order.index(source) if source in order else len(order)

    @property
    def per_second(self) -> bool:
        """True when a counter's step increase is divided by the step's seconds."""
        return self.kind is Kind.COUNTER and self.unit in (Unit.PER_SECOND, Unit.RATIO)
