"""The events part of the registry: events of a model, the nine kinds of the dashboard's overlay and our
``REPLICA_RECOVERED`` (``tables.EVENT_KINDS``), each
with time, kind and details; and the context (deployment, environment) other parts add to theirs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select

from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.records import EventInfo, InvalidValue
from servemetrics.registry.rows import deployment_name

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
    "REPLICA_RECOVERED": "Replica recovered",
}
"""Event kind -> the display name of the dashboard's Events overlay (metrics-dashboard.md "Events")."""


def serving(conn: Connection, model_id: str) -> dict[str, tuple[str | None, str | None]]:
    """Environment name -> (current deployment id, candidate of a running promotion) of ``model_id``.

    The rule of ``rows.env_info``: the latest promotion decides; SUCCEEDED -> its
    deployment is current, otherwise its previous deployment is; a running one names its candidate.
    """
    e, p = t.environments, t.promotions
    out: dict[str, tuple[str | None, str | None]] = {}
    for env in conn.execute(select(e.c.id, e.c.name).where(e.c.model_id == model_id).order_by(e.c.name)):
        latest = conn.execute(
            select(p.c.deployment_id, p.c.previous_deployment_id, p.c.status)
            .where(p.c.environment_id == env.id)
            .order_by(p.c.id.desc())
            .limit(1)
        ).first()
        if latest is None:
            out[env.name] = (None, None)
            continue
        current = latest.deployment_id if latest.status == "SUCCEEDED" else latest.previous_deployment_id
        running = latest.status not in t.TERMINAL_PROMOTION_STATUSES
        out[env.name] = (current, latest.deployment_id if running else None)
    return out


def deployment_context(conn: Connection, model_id: str, deployment_id: str) -> dict[str, Any]:
    """``{deployment_id, deployment_name, environment}`` of an event about a deployment: ``environment``
    is the first environment (by name) it serves, as current or candidate deployment, or None."""
    envs = [name for name, pair in serving(conn, model_id).items() if deployment_id in pair]
    return {
        "deployment_id": deployment_id,
        "deployment_name": deployment_name(conn, deployment_id),
        "environment": envs[0] if envs else None,
    }


def environment_context(conn: Connection, model_id: str, environment: str) -> dict[str, Any]:
    """``{deployment_id, deployment_name, environment}`` of an event about an environment: the deployment
    is the one the environment points at (None when it has none yet)."""
    current = serving(conn, model_id).get(environment, (None, None))[0]
    return {
        "deployment_id": current,
        "deployment_name": deployment_name(conn, current),
        "environment": environment,
    }


class Events:
    """``record_event`` and ``list_events``, over a ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

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
        with self._core.write(model_id) as conn:
            return self._core.event(
                conn,
                model_id,
                kind,
                self._core.at(at_ms),
                deployment_id=deployment_id,
                environment=environment,
                details=details,
            )

    def list_events(
        self, model_id: str, start_ms: int, end_ms: int, kinds: Iterable[str] | None = None
    ) -> list[EventInfo]:
        """Events of ``model_id`` with ``start_ms <= at_ms <= end_ms``, oldest first; ``kinds`` None = all.

        Raises InvalidValue for an unknown kind.
        """
        query = select(t.events).where(
            t.events.c.model_id == model_id, t.events.c.at_ms >= start_ms, t.events.c.at_ms <= end_ms
        )
        if kinds is not None:
            wanted = sorted(set(kinds))
            bad = [k for k in wanted if k not in EVENT_KINDS]
            if bad:
                raise InvalidValue(f"unknown event kinds {', '.join(bad)}; use {', '.join(EVENT_KINDS)}")
            query = query.where(t.events.c.kind.in_(wanted))
        with self._core.read() as conn:
            rows = conn.execute(query.order_by(t.events.c.at_ms, t.events.c.id))
            return [
                EventInfo(r.id, r.at_ms, r.kind, r.model_id, r.deployment_id, r.environment, r.details)
                for r in rows
            ]
