"""Row helpers of the replicas and their scrape targets, over an open ``Connection`` (the caller's
transaction): find a replica, read it, write its status, replace its targets, and the details of its
status-change events (REPLICA_TERMINATED, REPLICA_RECOVERED; docs/dashboard-api.md "Events"). Times are
epoch ms."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import tables as t
from servemetrics.registry.records import ReplicaInfo


def replica_row(conn: Connection, deployment_id: str, replica_id: str) -> Row[Any] | None:
    """The ``replicas`` row of replica ``replica_id`` of the deployment, or None."""
    r = t.replicas
    return conn.execute(select(r).where(r.c.deployment_id == deployment_id, r.c.name == replica_id)).first()


def replica_info(r: Row[Any], deployment_id: str) -> ReplicaInfo:
    """The ``ReplicaInfo`` of a ``replicas`` row."""
    return ReplicaInfo(r.name, deployment_id, r.status, r.created_at_ms, r.terminated_at_ms)


def write_status(conn: Connection, row: Row[Any], status: str, at: int) -> None:
    """Set the replica's ``status``; ``terminated_at_ms`` becomes ``at`` for an ended status (FAILED,
    TERMINATED: ``tables.ENDED_REPLICA_STATUSES``), None otherwise."""
    ended = status in t.ENDED_REPLICA_STATUSES
    values = {"status": status, "terminated_at_ms": at if ended else None}
    conn.execute(update(t.replicas).where(t.replicas.c.id == row.id).values(**values))


def status_details(row: Row[Any], status: str, **extra: Any) -> dict[str, Any]:
    """The status-change event's details (REPLICA_TERMINATED, REPLICA_RECOVERED) for the replica of
    ``row`` going to ``status``: ``{replica,
    old_status, status, **extra, old: {status}, new: {status}}`` (``extra``: the health checker's
    ``reason``)."""
    details = {"replica": row.name, "old_status": row.status, "status": status, **extra}
    return details | {"old": {"status": row.status}, "new": {"status": status}}


def replace_targets(conn: Connection, replica_row_id: int, urls: list[str]) -> None:
    """The replica's targets become ``urls``, in that order (the first is its serving address), of kind
    ``replica`` without labels, as the API registers them; a URL listed twice is kept once."""
    conn.execute(delete(t.targets).where(t.targets.c.replica_id == replica_row_id))
    for url in dict.fromkeys(urls):
        conn.execute(insert(t.targets).values(replica_id=replica_row_id, url=url, kind="replica", labels={}))
