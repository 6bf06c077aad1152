"""``GET /v1/models/{model_id}/events``: the model's events in a window, oldest first (docs/management.md
"Events"). Needs a key that may read the model's metrics.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from servemetrics.api.deps import ClockDep, ReadModel, RegistryDep
from servemetrics.api.errors import bad_request
from servemetrics.api.management_shapes import event_v1
from servemetrics.query.errors import WindowError
from servemetrics.query.windows import HOUR_MS
from servemetrics.registry import EVENT_KINDS
from servemetrics.timeutil import MAX_EPOCH_MS

router = APIRouter(prefix="/v1", tags=["management"])
EpochQ = Annotated[int | None, Query(ge=0, le=MAX_EPOCH_MS)]


def events_window(start_ms: int | None, end_ms: int | None, now_ms: int) -> tuple[int, int]:
    """``(start, end)`` in epoch ms of an events query, both included: ``end`` defaults to ``now_ms``,
    ``start`` to ``end`` − 1 h. Unlike the metrics windows (``query.windows.resolve_window``) there is
    no longest window and no check for seconds: any range of the event log may be listed.

    Raises:
        WindowError: ``start >= end`` (400, saying so).
    """
    end = now_ms if end_ms is None else end_ms
    start = end - HOUR_MS if start_ms is None else start_ms
    if start >= end:
        raise WindowError(f"start_epoch_millis ({start}) must be before end_epoch_millis ({end})")
    return start, end


def event_kinds(values: list[str] | None) -> list[str] | None:
    """The kinds asked for (repeated and comma-separated, any case) in upper case; None for all kinds.

    Raises:
        ApiError: 400 naming the unknown kinds and the known ones.
    """
    if not values:
        return None
    kinds = [k.strip().upper() for v in values for k in v.split(",") if k.strip()]
    bad = [k for k in kinds if k not in EVENT_KINDS]
    if bad:
        raise bad_request(f"unknown event kinds {', '.join(bad)}; use any of {', '.join(EVENT_KINDS)}")
    return kinds


@router.get("/models/{model_id}/events")
def list_events(
    registry: RegistryDep,
    clock: ClockDep,
    model: ReadModel,
    start_epoch_millis: EpochQ = None,
    end_epoch_millis: EpochQ = None,
    kinds: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    """Events in ``[start, end]`` (end defaults to now, start to end − 1 h), oldest first, of ``kinds``
    (repeat ``kinds=`` or separate with commas; all kinds when absent) → ``{events: [...]}``."""
    start, end = events_window(start_epoch_millis, end_epoch_millis, clock())
    events = registry.events.list_events(model.id, start, end, event_kinds(kinds))
    return {"events": [event_v1(e) for e in events]}
