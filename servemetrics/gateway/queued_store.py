"""Queued (async) inference requests persisted in the registry database (table ``async_requests``).

Every state change is one conditional ``UPDATE`` (``... WHERE status = 'QUEUED'``), so two workers, or a
worker and a cancel, never both win the same request; the same SQL runs on SQLite and PostgreSQL. A
request is QUEUED until a worker routes it (IN_PROGRESS, ``deployment_id`` set), then SUCCEEDED or
FAILED; a QUEUED request older than its ``max_time_in_queue_s`` becomes EXPIRED. ``recover()`` (at
start) puts IN_PROGRESS requests of a stopped service back to QUEUED. Methods are synchronous: call
them from a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, insert, or_, select, update

from servemetrics.registry import tables as t

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "EXPIRED"})
_A = t.async_requests


@dataclass(frozen=True)
class QueuedRequest:
    """One stored queued (async) request (times in epoch ms)."""

    id: str
    organization_id: int
    model_id: str
    environment: str
    deployment_id: str | None
    status: str
    model_input: str
    webhook_endpoint: str | None
    max_time_in_queue_s: int
    created_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    attempts: int
    response_status: int | None
    result: str | None
    errors: list[dict[str, str]]
    webhook_status: str | None
    webhook_attempts: int
    webhook_last_error: str | None
    webhook_next_at_ms: int | None


_HEAD = [c for c in _A.c if c.name not in ("model_input", "result")]
"""Columns of a request without its payloads (what the dispatcher scans every tick)."""


def _record(row: Any) -> QueuedRequest:
    m = row._mapping
    values = {k: m.get(k) for k in QueuedRequest.__dataclass_fields__}
    values["errors"] = list(values["errors"] or [])
    values["model_input"] = values["model_input"] or ""
    return QueuedRequest(**values)


def new_request_id() -> str:
    """A fresh, unguessable request id (32 hex digits)."""
    return secrets.token_hex(16)


class QueuedStore:
    """The ``async_requests`` table over the registry's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(
        self,
        organization_id: int,
        model_id: str,
        environment: str,
        model_input: str,
        webhook_endpoint: str | None,
        max_time_in_queue_s: int,
        now_ms: int,
    ) -> str:
        """Store a QUEUED request; return its id."""
        request_id = new_request_id()
        with self.engine.begin() as conn:
            conn.execute(
                insert(_A).values(
                    id=request_id,
                    organization_id=organization_id,
                    model_id=model_id,
                    environment=environment,
                    status="QUEUED",
                    model_input=model_input,
                    webhook_endpoint=webhook_endpoint,
                    max_time_in_queue_s=max_time_in_queue_s,
                    created_at_ms=now_ms,
                    attempts=0,
                    webhook_attempts=0,
                )
            )
        return request_id

    def get(
        self, request_id: str, model_id: str | None = None, organization_id: int | None = None
    ) -> QueuedRequest | None:
        """The request, or None (also when it belongs to another model or organization)."""
        query = select(_A).where(_A.c.id == request_id)
        if model_id is not None:
            query = query.where(_A.c.model_id == model_id)
        if organization_id is not None:
            query = query.where(_A.c.organization_id == organization_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _record(row) if row is not None else None

    def cancel(self, request_id: str) -> bool:
        """Delete the request if it is still QUEUED; False when it is not (any more)."""
        with self.engine.begin() as conn:
            gone = conn.execute(delete(_A).where(_A.c.id == request_id, _A.c.status == "QUEUED"))
        return gone.rowcount == 1

    def queued(self, limit: int = 10_000) -> list[QueuedRequest]:
        """QUEUED requests in arrival order, without their payloads (``model_input`` is ``""``)."""
        query = select(*_HEAD).where(_A.c.status == "QUEUED").order_by(_A.c.seq).limit(limit)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(query)]

    def claim(self, request_id: str, deployment_id: str, now_ms: int) -> bool:
        """QUEUED -> IN_PROGRESS on ``deployment_id`` (one more attempt); False if it was not QUEUED."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(_A)
                .where(_A.c.id == request_id, _A.c.status == "QUEUED")
                .values(
                    status="IN_PROGRESS",
                    deployment_id=deployment_id,
                    started_at_ms=now_ms,
                    attempts=_A.c.attempts + 1,
                )
            )
        return done.rowcount == 1

    def requeue(self, request_id: str) -> None:
        """IN_PROGRESS -> QUEUED, not counted as an attempt (no replica took the request)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(_A)
                .where(_A.c.id == request_id, _A.c.status == "IN_PROGRESS")
                .values(status="QUEUED", deployment_id=None, started_at_ms=None, attempts=_A.c.attempts - 1)
            )

    def recover(self) -> int:
        """At start: every IN_PROGRESS request (its service stopped) goes back to QUEUED."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(_A)
                .where(_A.c.status == "IN_PROGRESS")
                .values(status="QUEUED", deployment_id=None, started_at_ms=None)
            )
        return int(done.rowcount)

    def finish(
        self,
        request_id: str,
        status: str,
        now_ms: int,
        *,
        response_status: int | None,
        result: str | None,
        errors: list[dict[str, str]],
        from_status: str = "IN_PROGRESS",
    ) -> bool:
        """``from_status`` -> terminal ``status``; the webhook (if any) becomes PENDING, due now."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(_A)
                .where(_A.c.id == request_id, _A.c.status == from_status)
                .values(
                    status=status,
                    finished_at_ms=now_ms,
                    response_status=response_status,
                    result=result,
                    errors=errors,
                )
            )
            if done.rowcount == 1:
                conn.execute(
                    update(_A)
                    .where(_A.c.id == request_id, _A.c.webhook_endpoint.is_not(None))
                    .values(webhook_status="PENDING", webhook_next_at_ms=now_ms)
                )
        return done.rowcount == 1

    def expired(self, now_ms: int) -> list[QueuedRequest]:
        """QUEUED requests whose time in the queue is over (not yet marked), without their payloads."""
        query = (
            select(*_HEAD)
            .where(_A.c.status == "QUEUED", _A.c.created_at_ms + _A.c.max_time_in_queue_s * 1000 <= now_ms)
            .order_by(_A.c.seq)
        )
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(query)]

    def pending_webhooks(self) -> list[QueuedRequest]:
        """Requests whose webhook is still to be delivered (resumed after a restart)."""
        query = select(_A).where(_A.c.webhook_status == "PENDING").order_by(_A.c.seq)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(query)]

    def webhook_attempted(
        self, request_id: str, status: str, attempts: int, last_error: str | None, next_at_ms: int | None
    ) -> None:
        """Record a delivery attempt: the webhook's status, attempts so far, last error, next try."""
        with self.engine.begin() as conn:
            conn.execute(
                update(_A)
                .where(_A.c.id == request_id)
                .values(
                    webhook_status=status,
                    webhook_attempts=attempts,
                    webhook_last_error=last_error,
                    webhook_next_at_ms=next_at_ms,
                )
            )

    def purge_finished(self, before_ms: int) -> int:
        """Delete terminal requests finished before ``before_ms`` whose webhook is not pending (retention:
        the service calls it with its sample retention); returns how many were deleted."""
        with self.engine.begin() as conn:
            done = conn.execute(
                delete(_A).where(
                    _A.c.status.in_(sorted(TERMINAL)),
                    _A.c.finished_at_ms < before_ms,
                    or_(_A.c.webhook_status.is_(None), _A.c.webhook_status != "PENDING"),
                )
            )
        return int(done.rowcount)
