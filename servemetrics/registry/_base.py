"""Shared plumbing of the registry mixins: the engine, the clock, the key pepper, event recording, and the
change counter (``version``) that caches of registry reads compare."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self

from sqlalchemy import Connection, Engine, insert, select

from servemetrics.registry import tables as t
from servemetrics.registry.migrations import migrate
from servemetrics.registry.records import EventInfo, InvalidValue, NotFound
from servemetrics.timeutil import wall_clock_ms


class _OneConnection:
    """Stands in for the engine inside ``RegistryBase.transaction``: every ``begin()`` / ``connect()``
    hands out the one connection of the outer transaction, which commits or rolls back as a whole."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        yield self._conn

    connect = begin

    def dispose(self) -> None:
        """Nothing to release: the outer engine owns the connection."""


class RegistryBase:
    """Holds the engine; applies pending migrations on construction.

    ``version`` grows by one after each committed write of this object (every write method opens its
    transaction with ``_write()``; a ``transaction()`` block counts once, when it commits). A cache of
    registry reads keeps the version it read at and drops its answers when the version differs; the
    callables in ``listeners`` are called (in the writing thread, after the count) to wake such a cache.
    Writes by another process, or straight to the engine, are not counted.
    """

    def __init__(self, engine: Engine, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.engine = engine
        self._clock = clock
        self.version = 0
        self.listeners: list[Callable[[], None]] = []
        self._version_lock = threading.Lock()
        migrate(engine, clock())
        with engine.connect() as conn:
            row = conn.execute(
                select(t.registry_secrets.c.value).where(t.registry_secrets.c.name == "key_pepper")
            )
            self._pepper: str = row.scalar_one()

    def _at(self, at_ms: int | None) -> int:
        return self._clock() if at_ms is None else int(at_ms)

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """A view of this registry whose calls share one transaction: committed when the block ends,
        rolled back (nothing changed) when it raises. For one caller at a time (e.g. applying a config)."""
        with self.engine.begin() as conn:
            view = copy.copy(self)
            view.engine = _OneConnection(conn)  # type: ignore[assignment]
            yield view
        self._changed()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """``engine.begin()`` for a write: once it has committed, ``version`` grows."""
        with self.engine.begin() as conn:
            yield conn
        if not isinstance(self.engine, _OneConnection):  # in transaction(): counted at its commit
            self._changed()

    def _changed(self) -> None:
        with self._version_lock:
            self.version += 1
        for listener in list(self.listeners):
            listener()

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
