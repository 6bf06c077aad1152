"""Events of a model: the nine kinds of the dashboard's overlay, each with time, kind and details."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryBase
from servemetrics.registry.records import EventInfo, InvalidValue

EVENT_KINDS = t.EVENT_KINDS
EVENT_TITLES: dict[str, str] = {
    "DEPLOYED": "Deployed",
    "PROMOTED": "Promoted",
    "PROMOTION_CONTROL": "Promotion control action",
    "AUTOSCALING_CHANGED": "Autoscaling changed",
    "ACTIVATED": "Activated",
    "DEACTIVATED": "Deactivated",
    "INSTANCE_TYPE_CHANGED": "Instance type changed",
    "REPLICA_TERMINATED": "Replica terminated",
    "ENVIRONMENT_UPDATED": "Environment updated",
}
"""Event kind -> the display name of the dashboard's Events overlay (metrics-dashboard.md "Events")."""


class EventsMixin(RegistryBase):
    """``record_event`` and ``list_events``."""

    def record_event(
        self,
        model_id: str,
        kind: str,
        *,
        at_ms: int | None = None,
        deployment_id: str | None = None,
        environment: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> EventInfo:
        """Record an event; raises NotFound (no such model) or InvalidValue (unknown kind)."""
        with self.engine.begin() as conn:
            self._model_exists(conn, model_id)
            return self._event(
                conn,
                model_id,
                kind,
                self._at(at_ms),
                deployment_id=deployment_id,
                environment=environment,
                details=details,
            )

    def list_events(
        self, model_id: str, start_ms: int, end_ms: int, kinds: Iterable[str] | None = None
    ) -> list[EventInfo]:
        """Events of ``model_id`` with ``start_ms <= at_ms <= end_ms``, oldest first; ``kinds`` None = all."""
        query = select(t.events).where(
            t.events.c.model_id == model_id, t.events.c.at_ms >= start_ms, t.events.c.at_ms <= end_ms
        )
        if kinds is not None:
            wanted = sorted(set(kinds))
            bad = [k for k in wanted if k not in EVENT_KINDS]
            if bad:
                raise InvalidValue(f"unknown event kinds {', '.join(bad)}; use {', '.join(EVENT_KINDS)}")
            query = query.where(t.events.c.kind.in_(wanted))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(t.events.c.at_ms, t.events.c.id))
            return [
                EventInfo(r.id, r.at_ms, r.kind, r.model_id, r.deployment_id, r.environment, r.details)
                for r in rows
            ]
