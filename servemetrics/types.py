"""Type aliases shared by every layer (aliases only, no behaviour).

- ``Millis``: a Unix epoch time in integer milliseconds.
- ``Labels``: a label set as a tuple of ``(name, value)`` pairs sorted by name; hashable, so it can key dicts.
- ``SeriesKey``: ``(metric_name, Labels)``, the identity of one series.
"""

from __future__ import annotations

Millis = int
Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]


def labels_of(mapping: dict[str, str]) -> Labels:
    """Return the canonical ``Labels`` tuple (sorted by label name) for a mapping."""
    return tuple(sorted(mapping.items()))
