"""Counter continuity (DESIGN "Query semantics": gaps are not resets, promotions lose nothing). The
store counts a counter-like series (``_total``, ``_bucket``, ``_sum``, ``_count``) by the deltas
between its consecutive samples, a drop being a reset. The scraper adds at most one sample in front of a
counter-like series absent from the target's previous scrape, chosen by what the target exposed since
it was added (``Seen``: the last sample of every series ever seen, and per identity, the series
without the ``PHASE_LABELS``, the label sets seen under it):

- gaps: a series back after missing from some scrapes gets nothing; its sample pairs with its own last
  one (100, absent, 101 counts 1; a real restart drops, and the drop is a reset). Only a series never
  seen from the target since it was added is new.
- new series: ``prometheus_client`` creates a labelled child at its first increment, so a series such
  as ``requests_total{status_code="503"}`` first appears at 2, not 0. Like Prometheus' created-timestamp
  zero ingestion, a series new to a target already scraped successfully gets a 0 sample 1 ms after that
  earlier scrape (it did not exist then), so its first value counts. The first scrape of a target adds
  nothing: its series may be older than the service.
- creation times (issue 11 rule 7): when the series' family gives one (OpenMetrics ``<name>_created``,
  the text format's ``<name>_created`` gauges, ``ParseResult.created``), the 0 goes at that time instead
  (``_zero``): on a first scrape when it lies at most ``CREATED_HORIZON_MS`` (the store's 10-minute
  lookback; an older 0 would pair with nothing) before the first sample; for a series new to a target
  already scraped when it lies after that earlier scrape. A creation time at or before the earlier
  scrape means the series existed then without being exposed: its value then is unknown, so no 0 at
  all (the 1 ms zero would count what it had before). A creation time not before the first sample or
  after the scrape (a clock ahead) is not used: the rules without one apply. The 0 is a fact (the
  counter was 0 then), so storing it twice (a restart of the service) changes nothing: first write
  wins. The creation times are adapted from the source's zeros only when a scrape has a series new to
  its target (a first scrape, a new child), so a steady scrape pays one dict insert per ``_created``
  sample in the parser and nothing here. A new child beside a live one of the same identity
  (the gateway's counter for a new ``rollout_phase`` while the old phase's child stays exposed) is such a
  new counter too: it starts at 0 (old child 100, new child 7 then 12 counts 12; a copy of the old
  child's 100 would also count 12 there, by a reset, but only 50 of a new child first seen at 150).
- promotions: when no other label set of the identity is exposed any more and the identity appears
  under a label set it did not have last (the registry relabelled the target: ``environment``,
  ``rollout_phase``), it is the same counter under new labels. The series gets a copy of the identity's
  last sample (its value at its timestamp) in front. This is exact: the series' next pair is then the
  very pair the counter would have had unrelabelled, (t_last, v_last) -> (t, v), so the same delta
  (v - v_last, or v after a drop), spread over the same interval and under the same lookback; the old
  series ends at t_last, so the copied sample ends no pair of it and nothing is counted twice. Gauges are
  never copied or zeroed.
  Not solved here: a label set the counter returns to (a cancelled promotion) still holds its own last
  sample from before it left, and the store pairs that one with its next sample when they are at most
  ``COUNTER_GAP_MS`` apart, so the time away is counted under both label sets. The stale marker that
  ends the old label set does not help: counters continue across markers (gaps are not resets).

Staleness (DESIGN "staleness", issue 11 rule 6), as Prometheus' stale markers: a series of the target's
previous scrape that is absent from this one gets a ``STALE_NAN`` sample at this scrape's time; a failed
scrape (``up`` = 0) marks every series of the last good scrape; a target removed by ``set_targets``
marks its series at removal. The stores read a marker as "no value from here": CURRENT and gauge means
drop the series at once instead of after the 5-minute lookback; counters skip markers.

The sets are bounded by the target's series and forgotten when ``set_targets`` removes the target (its
``target_identity``: its URL and labels but the promotion ones, so a relabelled target keeps them). Per
sample the scrape does one key slice and one dict insert; only the series absent from the previous
scrape (a set difference) get more work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from servemetrics.ingest.exposition import COUNTER_SUFFIXES, CREATED_HORIZON_MS
from servemetrics.labels import PHASE_LABELS
from servemetrics.samples import STALE_NAN, Sample
from servemetrics.types import Labels, SeriesKey

__all__ = ["Seen", "TargetIdentity", "sample_before", "series_identity", "stale_markers", "zero_sample"]


def zero_sample(s: Sample, created: int | None, now: int, previous: int | None) -> Sample | None:
    """The 0 before ``s``, the first sample of a counter-like series new to its target (module
    docstring): at its creation time when that lies after the target's previous scrape (``None``: this is
    its first), within ``CREATED_HORIZON_MS`` before ``s`` for a first scrape, before ``s`` and not after
    ``now``; none when it lies at or before the previous scrape (the series existed then, unexposed);
    without a usable creation time, 1 ms after the previous scrape, or none on a first scrape."""
    if created is not None and created < s.ts_ms and created <= now:
        if previous is None:
            ok = created >= s.ts_ms - CREATED_HORIZON_MS
            return Sample(s.name, s.labels, 0.0, created) if ok else None
        return Sample(s.name, s.labels, 0.0, created) if created > previous else None
    if previous is None or previous + 1 >= s.ts_ms:
        return None
    return Sample(s.name, s.labels, 0.0, previous + 1)


def series_identity(sample: Sample) -> SeriesKey:
    """The series key without the labels that change when a promotion starts or ends: a counter whose
    ``rollout_phase`` changes is the same counter, not a new one starting from 0."""
    return (sample.name, tuple(kv for kv in sample.labels if kv[0] not in PHASE_LABELS))


TargetIdentity = tuple[str, Labels]
"""A target's URL and its labels but the promotion ones (``PHASE_LABELS``): what the scraper remembers a
target's series by."""


@dataclass
class Seen:
    """What one target exposed since it was added (for ``Scraper._with_created_zeros``).

    Attributes:
        ts_ms: the time of its last successful scrape.
        previous: the series of that scrape (key -> sample).
        last: the last sample of every series ever seen (so its keys are the series ever seen).
        label_sets: per counter-like identity (``_identity``), the series keys seen under it.
    """

    ts_ms: int
    previous: dict[SeriesKey, Sample]
    last: dict[SeriesKey, Sample]
    label_sets: dict[SeriesKey, list[SeriesKey]] = field(default_factory=dict)


def sample_before(
    seen: Seen,
    current: dict[SeriesKey, Sample],
    s: Sample,
    created: Callable[[], Mapping[SeriesKey, int]],
    now: int,
) -> Sample | None:
    """The sample to add before ``s``, of a series absent from the target's previous scrape (module
    docstring): a 0 for a series new to the target (``_zero``), a copy of the identity's last sample
    after a relabelling, or None (a gauge; a gap)."""
    if not s.name.endswith(COUNTER_SUFFIXES):
        return None
    key, own = s[:2], seen.last.get(s[:2])
    known = seen.label_sets.setdefault(series_identity(s), [])
    others = [k for k in known if k != key and k in seen.last]
    if own is None:
        known.append(key)
    if not others or any(k in current for k in others):  # none, or live siblings: separate counters
        return zero_sample(s, created().get(key), now, seen.ts_ms) if own is None else None
    latest = max((seen.last[k] for k in others), key=lambda p: p.ts_ms)
    if own is not None and latest.ts_ms <= own.ts_ms:
        return None  # back after a gap, not relabelled since
    return Sample(s.name, s.labels, latest.value, latest.ts_ms) if latest.ts_ms < s.ts_ms else None


def stale_markers(samples: Iterable[Sample], ts: int) -> list[Sample]:
    """A stale marker at ``ts`` for the series of each of ``samples`` (``samples.STALE_NAN``)."""
    return [Sample(s.name, s.labels, STALE_NAN, ts) for s in samples]
