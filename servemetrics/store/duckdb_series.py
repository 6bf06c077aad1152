"""``SeriesIndex``: the in-memory series index of ``DuckDBStore`` (id -> key and labels, key -> id, name ->
ids), rebuilt from the ``series`` table on open.

Ids are positions in ``keys`` and never reused: a series retention left without samples is dropped
(``forget``) and its id stays a hole (``DROPPED``, empty labels), so every other series keeps its id and
the arrays the store indexes by id stay aligned. ``version`` moves whenever a series is added or dropped
(the store's cache of matched ids compares it). Writes run on the store's writer thread only; readers
take no lock (``by_name`` values are replaced whole, never changed in place).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from servemetrics.types import Labels, SeriesKey

DROPPED: SeriesKey = ("", ())
"""The key at the id of a dropped series."""


class SeriesIndex:
    """The series of one store, by id (module docstring)."""

    def __init__(self) -> None:
        self.keys: list[SeriesKey] = []
        self.ids: dict[SeriesKey, int] = {}
        self.labels: list[dict[str, str]] = []
        self.by_name: dict[str, tuple[int, ...]] = {}
        self.version = 0

    def load(self, rows: Iterable[tuple[int, str, Labels]]) -> None:
        """Add the ``(id, name, labels)`` rows of the ``series`` table, by increasing id (gaps are the ids
        of dropped series)."""
        for sid, name, labels in rows:
            assert sid >= len(self.keys)
            while len(self.keys) < sid:
                self.keys.append(DROPPED)
                self.labels.append({})
            self.add(name, labels)

    def add(self, name: str, labels: Labels) -> int:
        """A new series' id (the next one)."""
        sid = len(self.keys)
        self.keys.append((name, labels))
        self.ids[(name, labels)] = sid
        self.labels.append(dict(labels))
        self.by_name[name] = (*self.by_name.get(name, ()), sid)
        self.version += 1
        return sid

    def forget(self, gone: np.ndarray) -> None:
        """Drop the series of the ids ``gone`` (live ones); their ids become holes."""
        names: dict[str, set[int]] = {}
        for sid in gone.tolist():
            key = self.keys[sid]
            del self.ids[key]
            names.setdefault(key[0], set()).add(sid)
            self.keys[sid], self.labels[sid] = DROPPED, {}
        for name, sids in names.items():
            kept = tuple(s for s in self.by_name[name] if s not in sids)
            if kept:
                self.by_name[name] = kept
            else:
                del self.by_name[name]
        self.version += 1
