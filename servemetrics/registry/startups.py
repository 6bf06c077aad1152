"""The startups part of the registry: replicas' startup attempts (``startup_attempts``; the rules of
marks, phases and outcomes are in ``registry.startup_marks``).

Writers: the deployments part opens a ``lifecycle`` attempt when a replica is registered (or registered
again after it ended: ``begin_lifecycle``) and ends a replica's open attempts when it fails or is
terminated (``end_open``), in its own transaction; the gateway's health checker marks the first healthy
check (``healthy``); the scraper's kube-state-metrics timestamps of a replica's pod become a
``kube_state`` attempt per pod uid (``record_pod``), which replaces the replica's lifecycle attempts (a
pod's own timestamps say more). Times are epoch ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.startup_marks import KUBE_STATE, LIFECYCLE, READY_MARK, START_MARK, Attempt

RECENT_LIMIT = 1000
"""Answers are computed over at most this many most recent attempts in the window (the platform's)."""


def _open_of(replica_id: str, deployment_id: str, source: str | None = None) -> Any:
    """The condition: attempts of the replica neither ready nor ended (of ``source``, or any)."""
    s = t.startup_attempts
    cond = (
        (s.c.deployment_id == deployment_id)
        & (s.c.replica == replica_id)
        & s.c.ready_at_ms.is_(None)
        & s.c.ended_at_ms.is_(None)
    )
    return cond & (s.c.source == source) if source else cond


def _has_pod_attempts(conn: Connection, deployment_id: str, replica_id: str) -> bool:
    s = t.startup_attempts
    where = (s.c.deployment_id == deployment_id) & (s.c.replica == replica_id) & (s.c.source == KUBE_STATE)
    return conn.execute(select(s.c.id).where(where).limit(1)).first() is not None


def begin_lifecycle(conn: Connection, deployment_id: str, replica_id: str, at: int) -> None:
    """Open a lifecycle attempt of the replica registered at ``at`` (its open attempts end first: a
    replica registered again starts over); none for a replica whose pod timestamps are known."""
    end_open(conn, deployment_id, replica_id, at)
    if _has_pod_attempts(conn, deployment_id, replica_id):
        return
    conn.execute(
        insert(t.startup_attempts).values(
            deployment_id=deployment_id,
            replica=replica_id,
            source=LIFECYCLE,
            attempt_key=str(at),
            started_at_ms=at,
            marks={START_MARK[LIFECYCLE]: at},
        )
    )


def end_open(conn: Connection, deployment_id: str, replica_id: str, at: int) -> None:
    """The replica's open attempts end at ``at`` without being ready (FAILED)."""
    s = t.startup_attempts
    conn.execute(update(s).where(_open_of(replica_id, deployment_id)).values(ended_at_ms=at))


def _attempt(row: Row[Any]) -> Attempt:
    return Attempt(
        row.id,
        row.model_id,
        row.deployment_id,
        row.deployment_name,
        row.replica,
        row.source,
        row.started_at_ms,
        row.ready_at_ms,
        row.ended_at_ms,
        dict(row.marks or {}),
    )


class Startups:
    """Startup attempts of replicas, over a ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    def healthy(self, deployment_id: str, replica_id: str, at_ms: int | None = None) -> bool:
        """The replica's first healthy check at ``at_ms``: its open lifecycle attempt is ready then.
        False (nothing written) when it has none (already ready, ended, or timed by its pod)."""
        s, at = t.startup_attempts, self._core.at(at_ms)
        query = select(s.c.id, s.c.marks).where(_open_of(replica_id, deployment_id, LIFECYCLE))
        with self._core.read() as conn:  # most calls find none: no write (nor change count) for them
            if conn.execute(query).first() is None:
                return False
        with self._core.write() as conn:
            row = conn.execute(query).first()
            if row is None:
                return False
            marks = {**(row.marks or {}), READY_MARK[LIFECYCLE]: at}
            conn.execute(update(s).where(s.c.id == row.id).values(ready_at_ms=at, marks=marks))
            return True

    def record_pod(
        self, deployment_id: str, replica_id: str, uid: str, marks: Mapping[str, int], failed_at: int | None
    ) -> bool:
        """Store the kube-state-metrics ``marks`` of the replica's pod ``uid`` (``startup_marks``
        names; ``created`` required, else nothing is stored) and ``failed_at`` (when the pod was seen
        failed before ready, else None; an attempt that ended keeps its end). A new pod ends the
        replica's older open pod attempts at its creation and drops its lifecycle attempts. False when
        nothing changed or the deployment is gone."""
        start = marks.get(START_MARK[KUBE_STATE])
        if start is None:
            return False
        s = t.startup_attempts
        key = (s.c.deployment_id == deployment_id) & (s.c.replica == replica_id) & (s.c.source == KUBE_STATE)
        ready = marks.get(READY_MARK[KUBE_STATE])
        with self._core.read() as conn:  # every scrape reports its pods: write only what changed
            row = conn.execute(select(s).where(key & (s.c.attempt_key == uid))).first()
        ended = row.ended_at_ms if row is not None and row.ended_at_ms is not None else failed_at
        values = {
            "started_at_ms": start,
            "ready_at_ms": ready,
            "ended_at_ms": ended if ready is None else None,
            "marks": dict(marks),
        }
        if row is not None and all(getattr(row, k) == v for k, v in values.items()):
            return False
        with self._core.write() as conn:
            if not rows.deployment_exists(conn, deployment_id):
                return False
            if row is not None:
                conn.execute(update(s).where(s.c.id == row.id).values(**values))
                return True
            conn.execute(
                update(s)
                .where(_open_of(replica_id, deployment_id, KUBE_STATE) & (s.c.started_at_ms < start))
                .values(ended_at_ms=start)
            )
            mine = (s.c.deployment_id == deployment_id) & (s.c.replica == replica_id)
            conn.execute(delete(s).where(mine & (s.c.source == LIFECYCLE)))
            new = {"deployment_id": deployment_id, "replica": replica_id, "source": KUBE_STATE}
            conn.execute(insert(s).values(**new, attempt_key=uid, **values))
            return True

    def recent(
        self, deployment_ids: Iterable[str], start_ms: int, end_ms: int, limit: int = RECENT_LIMIT
    ) -> list[Attempt]:
        """The at most ``limit`` most recent attempts of the deployments started in ``[start_ms,
        end_ms)``, newest first (ties by id, newest first)."""
        s, d = t.startup_attempts, t.deployments
        ids = list(deployment_ids)
        if not ids:
            return []
        query = (
            select(s, d.c.model_id, d.c.name.label("deployment_name"))
            .join(d, s.c.deployment_id == d.c.id)
            .where(s.c.deployment_id.in_(ids), s.c.started_at_ms >= start_ms, s.c.started_at_ms < end_ms)
            .order_by(s.c.started_at_ms.desc(), s.c.id.desc())
            .limit(limit)
        )
        with self._core.read() as conn:
            return [_attempt(r) for r in conn.execute(query)]
