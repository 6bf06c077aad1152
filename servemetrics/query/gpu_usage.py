"""Organization GPU usage: active GPUs over time, grouped by GPU type or by model.

Active GPUs of one deployment in one step = its ``baseten_replicas_active`` in the step (the mean of the
step's samples, one value per deployment as the catalog's DEPLOYMENT scope computes it; ``execute``)
x its ``gpu_count``. A group's value is the sum over its deployments that have a sample in the step;
``None`` when none has (never 0: DESIGN "No sample in a step -> null"). The window and step follow the
SERIES rules (``windows.resolve_window``: default last hour, at most 7 days, step from the ladder).
Source of the rule: metrics-dashboard.md "Organization GPU usage" (ready replicas x GPUs per replica).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from servemetrics.catalog import CATALOG
from servemetrics.query.execute import execute
from servemetrics.query.plan import Plan
from servemetrics.query.value_sets import split_series
from servemetrics.query.windows import Mode, Window, resolve_window
from servemetrics.store.base import Store, ValueSet

ACTIVE = CATALOG["baseten_replicas_active"]


class GroupBy(StrEnum):
    """How the response groups deployments."""

    GPU_TYPE = "gpu_type"
    MODEL = "model"


@dataclass(frozen=True)
class GpuGroup:
    """One group (a GPU type or a model): its ``key`` (the type, or the model id), display ``name`` and
    active GPUs per step (a count, fractional when replicas changed within the step; None: no sample)."""

    key: str
    name: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class GpuUsage:
    """Active GPUs over a SERIES window ``[start_ms, end_ms)`` (epoch ms) with step ``step_s`` seconds.

    Attributes:
        group_by: how deployments were grouped.
        gpu_types: every GPU type of the deployments given (sorted, unfiltered).
        step_starts_ms: the start of every step (epoch ms).
        groups: sorted by key; groups without a sample in any step are left out.
    """

    start_ms: int
    end_ms: int
    step_s: int
    group_by: GroupBy
    gpu_types: tuple[str, ...]
    step_starts_ms: tuple[int, ...]
    groups: tuple[GpuGroup, ...]


@dataclass(frozen=True)
class GpuDeployment:
    """A deployment with GPUs (``gpu_count`` > 0 per replica, of ``gpu_type``) and its model."""

    model_id: str
    model_name: str
    deployment_id: str
    gpu_type: str
    gpu_count: int


def _active_replicas(
    store: Store, dep: GpuDeployment, window: Window, starts: Sequence[ValueSet]
) -> list[float | None]:
    """Active replicas of one deployment per step (None: no sample in the step)."""
    value_sets = tuple(ValueSet(v.start_ms, v.end_ms, frozenset({dep.deployment_id})) for v in starts)
    result = execute(Plan(dep.model_id, Mode.SERIES, window, value_sets, (ACTIVE,)), store)
    if not result.descriptors:
        return [None] * len(value_sets)
    return [row.values[0][0] for row in result.rows]


def _key_name(dep: GpuDeployment, group_by: GroupBy) -> tuple[str, str]:
    if group_by is GroupBy.MODEL:
        return dep.model_id, dep.model_name
    return dep.gpu_type, dep.gpu_type


def _groups(
    store: Store,
    deployments: Sequence[GpuDeployment],
    window: Window,
    steps: Sequence[ValueSet],
    group_by: GroupBy,
) -> tuple[GpuGroup, ...]:
    """Per group: active replicas x ``gpu_count`` summed over its deployments with a sample in a step."""
    sums: dict[str, list[list[float]]] = {}
    names: dict[str, str] = {}
    for dep in deployments:
        key, name = _key_name(dep, group_by)
        names.setdefault(key, name)
        slots = sums.setdefault(key, [[] for _ in steps])
        for i, active in enumerate(_active_replicas(store, dep, window, steps)):
            if active is not None:
                slots[i].append(active * dep.gpu_count)
    return tuple(
        GpuGroup(key, names[key], tuple(math.fsum(v) if v else None for v in sums[key]))
        for key in sorted(sums)
        if any(sums[key])
    )


def gpu_usage(
    store: Store,
    deployments: Sequence[GpuDeployment],
    start_ms: int | None,
    end_ms: int | None,
    now_ms: int,
    group_by: GroupBy = GroupBy.GPU_TYPE,
    gpu_types: Collection[str] | None = None,
) -> GpuUsage:
    """Active GPUs per step and group (``api.schemas.gpu_usage_body`` is the JSON object of
    ``GET /v1/organization/gpu_usage``).

    Args:
        store: the sample store.
        deployments: the organization's deployments with GPUs (those the caller may read).
        start_ms, end_ms: the window in epoch ms (None: defaults of a SERIES request).
        now_ms: now, epoch ms.
        group_by: group by GPU type or by model.
        gpu_types: only deployments of these GPU types (None or empty: all); unknown types match nothing.

    Returns:
        ``GpuUsage``: the window, every GPU type of ``deployments`` (sorted, unfiltered), the step
        starts and the groups sorted by key (see ``GpuGroup``); groups without a sample in any step are
        left out.

    Raises:
        WindowError: bad window (400).
    """
    window = resolve_window(Mode.SERIES, start_ms, end_ms, now_ms)
    assert window.step_s is not None
    steps = split_series(window.start_ms, window.end_ms, window.step_s, [(window.start_ms, frozenset())])
    wanted = set(gpu_types) if gpu_types else None
    counted = [d for d in deployments if d.gpu_count > 0 and (wanted is None or d.gpu_type in wanted)]
    return GpuUsage(
        window.start_ms,
        window.end_ms,
        window.step_s,
        group_by,
        tuple(sorted({d.gpu_type for d in deployments if d.gpu_count > 0})),
        tuple(vs.start_ms for vs in steps),
        _groups(store, counted, window, steps, group_by),
    )
