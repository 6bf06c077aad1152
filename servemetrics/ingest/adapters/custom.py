"""Custom metrics: the series of a replica's target that no adapter rule maps, kept under their own names.

A custom server may expose metrics of its own (the platform: "custom servers expose their own metrics";
platform-facts.md "Custom (application) metrics"). Such a series is stored as exposed, every label kept,
plus ``source="custom"`` and the target labels, and the metrics API answers it by its own name
(``query.custom``). Per scrape of a target at most ``custom_series_limit`` series are kept, in exposition
order; a histogram's or summary's samples of one label set (every ``le`` or ``quantile``, ``_sum``,
``_count``) count as one series, so a histogram is kept whole or not at all. What is not kept is counted
by reason (``DROP_REASONS``) in ``servemetrics_custom_series_dropped_total``.
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule
from servemetrics.labels import CUSTOM_SOURCE
from servemetrics.types import Labels

RESERVED_PREFIXES: tuple[str, ...] = ("baseten_", "servemetrics_")
"""Name prefixes of our own series (the catalog's, the service's): a custom series may not take one."""
RESERVED_NAMES: frozenset[str] = frozenset({"up"})
"""Names the scraper writes itself."""

SERIES_LIMIT, RESERVED_NAME = "series_limit", "reserved_name"
DROP_REASONS: tuple[str, ...] = (SERIES_LIMIT, RESERVED_NAME)
"""Why a custom series was not kept: the target's scrape had ``custom_series_limit`` series already, or
its name is reserved (``RESERVED_PREFIXES``, ``RESERVED_NAMES``)."""

_GROUP_SUFFIXES = ("_bucket", "_sum", "_count")
_GROUP_LABELS = frozenset({"le", "quantile"})


def is_reserved(name: str) -> bool:
    """True when ``name`` may not be a custom series (``RESERVED_PREFIXES``, ``RESERVED_NAMES``)."""
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def _group(name: str, labels: Labels) -> tuple[str, Labels]:
    """The series a sample belongs to for the limit: a histogram's or summary's family and label set."""
    for suffix in _GROUP_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name, tuple(kv for kv in labels if kv[0] not in _GROUP_LABELS)


class CustomSeries:
    """The custom series of one scrape of one target: which are kept, and the others counted.

    Args:
        limit: series kept at most (``ScrapeLimits.custom_series_limit``); 0 keeps none and counts none
            (custom metrics off for the target).

    Attributes:
        dropped: reason (``DROP_REASONS``) -> source series not kept in this scrape.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped: dict[str, int] = {}
        self._kept: set[tuple[str, Labels]] = set()

    def rule(self, name: str, labels: Labels) -> Rule | None:
        """The keep-as-is rule of an unmapped source series (``name``, ``labels``), or None when it is not
        kept (counted in ``dropped``). Call once per series and scrape."""
        if self.limit <= 0:
            return None
        if is_reserved(name):
            self._drop(RESERVED_NAME)
            return None
        group = _group(name, labels)
        if group not in self._kept:
            if len(self._kept) >= self.limit:
                self._drop(SERIES_LIMIT)
                return None
            self._kept.add(group)
        return Rule(name, name, CUSTOM_SOURCE, labels=None)

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
