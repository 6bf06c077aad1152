"""``group_cells``: the per-series values of ``duckdb_eval.evaluate`` summed per group into the ``Store``
answer (``store.base``: which series serve each value set, and which groups appear)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from servemetrics.store.base import Cell, GroupKey, Selection, SelectResult, ValueSet


def serving(value_sets: Sequence[ValueSet], deployments: Sequence[str | None]) -> np.ndarray:
    """``[series, value set]`` -> does the series' deployment serve in that value set (a series without a
    ``deployment_id`` never does)."""
    names = sorted({d for d in deployments if d is not None})
    masks = np.zeros((len(names) + 1, len(value_sets)), dtype=bool)  # the last row: no deployment_id
    for k, name in enumerate(names):
        masks[k] = [name in vs.deployment_ids for vs in value_sets]
    code: dict[str | None, int] = {name: k for k, name in enumerate(names)}
    return masks[np.array([code.get(d, len(names)) for d in deployments], dtype=np.int64)]


def group_cells(
    sel: Selection,
    groups: Sequence[GroupKey],
    deployments: Sequence[str | None],
    value: np.ndarray,
    has: np.ndarray,
) -> SelectResult:
    """Sum per group the series that serve each value set and have data there (``Cell`` or ``None``).

    Every group with a series that serves in some value set appears, even when all its cells are ``None``.
    """
    n_v = len(sel.value_sets)
    serve = serving(sel.value_sets, deployments)
    use = serve & has
    keys = sorted(set(groups))
    position = {g: k for k, g in enumerate(keys)}
    group_of = np.array([position[g] for g in groups], dtype=np.int64)  # per series
    totals = np.zeros((len(keys), n_v))
    counts = np.zeros((len(keys), n_v), dtype=np.int64)
    present = np.zeros(len(keys), dtype=bool)
    np.add.at(totals, group_of, np.where(use, value, 0.0))
    np.add.at(counts, group_of, use.astype(np.int64))
    np.logical_or.at(present, group_of, serve.any(axis=1))
    out: SelectResult = {}
    for k, key in enumerate(keys):
        if present[k]:  # a group whose series serve in some value set appears, even with no data
            out[key] = [
                Cell(t, c) if c else None for t, c in zip(totals[k].tolist(), counts[k].tolist(), strict=True)
            ]
    return out
