"""Shared plumbing of the registry mixins: the engine, the clock, the key pepper, event recording."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, insert, select

from servemetrics.registry import tables as t
from servemetrics.registry.migrations import migrate
from servemetrics.registry.records import EventInfo, InvalidValue, NotFound


def wall_clock_ms() -> int:
    """Now as epoch milliseconds."""
    return time.time_ns() // 1_000_000


class RegistryBase:
    """Holds the engine; applies pending migrations on construction."""

    def __init__(self, engine: Engine, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.engine = engine
        self._clock = clock
        migrate(engine, clock())
        with engine.connect() as conn:
            row = conn.execute(
                select(t.registry_secrets.c.value).where(t.registry_secrets.c.name == "key_pepper")
            )
            self._pepper: str = row.scalar_one()

    def _at(self, at_ms: int | None) -> int:
        return self._clock() if at_ms is None else int(at_ms)

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()

    def _event(
        self,
        conn: Connection,
        model_id: str,
        kind: str,
        at_ms: int,
        *,
        deployment_id: str | None = None,
        environment: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> EventInfo:
        if kind not in t.EVENT_KINDS:
            raise InvalidValue(f"unknown event kind {kind!r}; use one of {', '.join(t.EVENT_KINDS)}")
        values = dict(
            at_ms=at_ms,
            kind=kind,
            model_id=model_id,
            deployment_id=deployment_id,
            environment=environment,
            details=details or {},
        )
        event_id = conn.execute(insert(t.events).values(**values).returning(t.events.c.id)).scalar_one()
        return EventInfo(id=event_id, **values)  # type: ignore[arg-type]

    @staticmethod
    def _model_exists(conn: Connection, model_id: str) -> None:
        if conn.execute(select(t.models.c.id).where(t.models.c.id == model_id)).first() is None:
            raise NotFound(f"no model {model_id!r}")
