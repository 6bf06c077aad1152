"""Group keys of the store's answers: their label layouts (``KeyLayout``), the status class of a code, and
the ways ``execute`` folds groups together: summed (``sum_groups``), averaged (copies of one quantity,
``average_groups``), one source per replica (``preferred_source``) or per deployment
(``one_request_source``). ``SelectResult`` in, ``SelectResult`` out; no store access here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servemetrics.catalog.model import MetricDef
from servemetrics.store.base import Cell, GroupKey, SelectResult


@dataclass(frozen=True)
class KeyLayout:
    """The labels of a group key, in order: ``(*scope, *phases, by_label)`` (``by_label`` only for a
    by-label metric). ``project`` maps keys to a layout with fewer labels."""

    scope: tuple[str, ...]
    phases: tuple[str, ...] = ()
    by_label: str | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """The ``group_by`` of the selection whose keys have this layout."""
        return self.scope + self.phases + ((self.by_label,) if self.by_label else ())

    @property
    def by_label_index(self) -> int:
        """Position of the ``by_label`` value in a key."""
        return len(self.scope) + len(self.phases)

    def dropping(self, *names: str) -> KeyLayout:
        """This layout without the scope and phase labels ``names``."""
        scope = tuple(n for n in self.scope if n not in names)
        return KeyLayout(scope, tuple(n for n in self.phases if n not in names), self.by_label)

    def project(self, to: KeyLayout) -> Callable[[GroupKey], GroupKey]:
        """A key of this layout -> the key of ``to`` (whose labels are a subset of these)."""
        positions = [self.labels.index(n) for n in to.labels]
        return lambda key: tuple(key[p] for p in positions)


def status_class(code: str) -> str | None:
    """``"503"`` -> ``"5xx"``; a class as a custom server's counter may already give it (``"2xx"``, as
    prometheus-fastapi-instrumentator groups status codes) stays itself; None for codes outside 2xx / 4xx
    / 5xx or not numeric."""
    if len(code) == 3 and code[0] in "245" and (code[1:].isdigit() or code[1:].lower() == "xx"):
        return f"{code[0]}xx"
    return None


def average_groups(res: SelectResult, project: Callable[[GroupKey], GroupKey]) -> SelectResult:
    """Groups that ``project`` maps to one key become one group whose cell is the mean of their cells
    (series count 1): copies or pieces of one quantity, never to be summed."""
    merged: dict[GroupKey, list[list[float]]] = {}
    n = len(next(iter(res.values())))
    for key, cells in res.items():
        slots = merged.setdefault(project(key), [[] for _ in range(n)])
        for i, cell in enumerate(cells):
            if cell is not None:
                slots[i].append(cell.total)
    return {
        key: [Cell(math.fsum(v) / len(v), 1) if v else None for v in slots] for key, slots in merged.items()
    }


def preferred_source(
    res: SelectResult, layout: KeyLayout, metric: MetricDef
) -> tuple[SelectResult, KeyLayout]:
    """REPLICA scope: per replica (the key without ``source``) and value set, the cell of the most
    preferred source that has data there (``MetricDef.source_rank``, ties by source name), never a sum
    or mean across sources: they are views of the same container. Returns the keys without ``source``."""
    one = layout.dropping("source")
    project = layout.project(one)
    at = layout.labels.index("source")
    ranked = sorted(res.items(), key=lambda kv: (metric.source_rank(kv[0][at]), kv[0][at]))
    n = len(ranked[0][1])
    out: dict[GroupKey, list[Cell | None]] = {}
    for key, cells in ranked:
        slots = out.setdefault(project(key), [None] * n)
        for i, cell in enumerate(cells):
            if slots[i] is None and cell is not None:
                slots[i] = cell
    return out, one


def one_request_source(
    res: SelectResult, layout: KeyLayout, metric: MetricDef
) -> tuple[SelectResult, KeyLayout]:
    """``MetricDef.request_sources``: per deployment and value set, only the cells of the most preferred
    source with data there (``source_rank``, ties by name), every status code alike: the gateway's count
    of a deployment's requests, else Knative's, else the replicas' own, never two of them added. Returns
    the keys without ``source`` (cells of one source summed)."""
    dep, at = layout.labels.index("deployment_id"), layout.labels.index("source")
    best: dict[tuple[str, int], tuple[int, str]] = {}
    for key, cells in res.items():
        rank = (metric.source_rank(key[at]), key[at])
        for i, cell in enumerate(cells):
            if cell is not None and rank < best.get((key[dep], i), (len(metric.request_sources) + 1, "")):
                best[(key[dep], i)] = rank
    kept = {
        key: [c if c is not None and best[(key[dep], i)][1] == key[at] else None for i, c in enumerate(cells)]
        for key, cells in res.items()
    }
    one = layout.dropping("source")
    return sum_groups(kept, layout.project(one)), one


def sum_groups(res: SelectResult, project: Callable[[GroupKey], GroupKey]) -> SelectResult:
    """Groups that ``project`` maps to one key become one group: cells summed (totals and series)."""
    merged: dict[GroupKey, list[Cell | None]] = {}
    for key, cells in res.items():
        slots = merged.setdefault(project(key), [None] * len(cells))
        for i, cell in enumerate(cells):
            if cell is not None:
                prev = slots[i]
                slots[i] = cell if prev is None else Cell(prev.total + cell.total, prev.series + cell.series)
    return merged
