"""Samples and columnar sample batches, the unit of ingest.

A ``Sample`` is one point of one series; a ``SampleBatch`` is many points in columnar form (numpy
arrays), which is how every store appends (never row by row).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from servemetrics.types import Labels, SeriesKey


class Sample(NamedTuple):
    """One point: series ``name`` with ``labels`` has ``value`` at ``ts_ms`` (epoch milliseconds)."""

    name: str
    labels: Labels
    value: float
    ts_ms: int

    @property
    def key(self) -> SeriesKey:
        """The series identity ``(name, labels)``."""
        return (self.name, self.labels)


STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
"""Prometheus' stale marker (``value.StaleNaN``): a sample with this value says the series left its target
at that instant (DESIGN "staleness"). Ingest drops every other NaN, so a store reads any NaN as a marker."""


def is_stale_nan(value: float) -> bool:
    """Whether ``value`` has exactly the bits of ``STALE_NAN`` (a sender's marker; other NaNs are values
    that ingest drops)."""
    return math.isnan(value) and struct.pack("<d", value) == _STALE_BYTES


_STALE_BYTES = struct.pack("<d", STALE_NAN)


MAX_FUTURE_MS = 10 * 60 * 1000
"""Samples more than this ahead of the ingesting clock are refused (Prometheus TSDB does the same): one
future timestamp would otherwise move the store's sealed range past now."""


@dataclass
class SampleBatch:
    """Many samples in columnar form.

    Attributes:
        series: distinct series keys; ``series_index[i]`` indexes into it.
        series_index: uint32 array, one entry per sample.
        ts_ms: int64 array of epoch milliseconds, one per sample.
        values: float64 array, one per sample.
    """

    series: list[SeriesKey]
    series_index: np.ndarray
    ts_ms: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.ts_ms.shape[0])

    @classmethod
    def from_samples(cls, samples: Iterable[Sample]) -> SampleBatch:
        """Build a batch from ``Sample`` rows (keeps their order)."""
        index: dict[SeriesKey, int] = {}
        idx: list[int] = []
        ts: list[int] = []
        vals: list[float] = []
        for s in samples:
            idx.append(index.setdefault((s.name, s.labels), len(index)))
            ts.append(s.ts_ms)
            vals.append(s.value)
        return cls(
            series=list(index),
            series_index=np.asarray(idx, dtype=np.uint32),
            ts_ms=np.asarray(ts, dtype=np.int64),
            values=np.asarray(vals, dtype=np.float64),
        )

    def before(self, limit_ms: int) -> tuple[SampleBatch, int]:
        """The batch without samples at or after ``limit_ms``, and how many were dropped."""
        keep = self.ts_ms < limit_ms
        dropped = int(keep.size - np.count_nonzero(keep))
        if not dropped:
            return self, 0
        return SampleBatch(self.series, self.series_index[keep], self.ts_ms[keep], self.values[keep]), dropped

    def pieces(self, size: int) -> Iterator[SampleBatch]:
        """The batch cut, in order, into batches of at most ``size`` samples (``size`` >= 1), each with only
        the series it uses; the batch itself when it is no larger."""
        if len(self) <= size:
            yield self
            return
        for lo in range(0, len(self), size):
            used, local = np.unique(self.series_index[lo : lo + size], return_inverse=True)
            yield SampleBatch(
                [self.series[i] for i in used.tolist()],
                local.astype(np.uint32),
                self.ts_ms[lo : lo + size],
                self.values[lo : lo + size],
            )

    def samples(self) -> Iterable[Sample]:
        """Iterate the batch as ``Sample`` rows (for tests and small batches)."""
        columns = (self.series_index.tolist(), self.ts_ms.tolist(), self.values.tolist())
        for i, t, v in zip(*columns, strict=True):
            name, labels = self.series[i]
            yield Sample(name, labels, v, t)
