"""``RegistryCore``: what every part of the registry shares: the engine, the clock, the key pepper,
transactions and event recording.

Every part takes one core. Writes go through ``write()`` (the one place an ordinary change commits) and
reads through ``read()``; ``transaction()`` gives a core whose writes and reads all join one transaction,
committed when its block ends. ``changes`` counts committed writes (``ChangeCounter``), so caches of
registry reads (the gateway's ``RegistryView``) know when to reload.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, insert

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry.migrations import migrate
from servemetrics.registry.pepper import key_pepper
from servemetrics.registry.records import EventInfo, InvalidValue
from servemetrics.timeutil import wall_clock_ms


class _OneConnection:
    """Stands in for the engine inside ``RegistryCore.transaction``: every ``begin()`` / ``connect()``
    hands out the one connection of the outer transaction, which commits or rolls back as a whole."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """The outer transaction's connection (neither committed nor closed here)."""
        yield self._conn

    connect = begin

    def dispose(self) -> None:
        """Nothing to release: the outer engine owns the connection."""


class ChangeCounter:
    """How many writes of one registry have committed (``value``), and who to tell after each.

    ``value`` grows by one after each committed ``RegistryCore.write()`` (a ``transaction()`` block counts
    once, when it commits). A cache of registry reads keeps the value it read at and drops its answers
    when the value differs; the callables in ``listeners`` are called (in the writing thread, after the
    count) to wake such a cache. Writes by another process, or straight to the engine, are not counted.
    """

    def __init__(self) -> None:
        self.value = 0
        self.listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def bump(self) -> None:
        """Count one committed write, then call every listener."""
        with self._lock:
            self.value += 1
        for listener in list(self.listeners):
            listener()


class RegistryCore:
    """The engine (pending migrations applied on construction), the clock (epoch ms) and the pepper of
    API key hashes: ``pepper`` given from outside, else the registry's own (``registry.pepper``; raises
    ``KeyPepperError`` when they do not fit)."""

    def __init__(
        self, engine: Engine, clock: Callable[[], int] = wall_clock_ms, pepper: str | None = None
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.changes = ChangeCounter()
        fresh = "0002_api_key_pepper" in migrate(engine, clock())
        self.pepper: str = key_pepper(engine, pepper, fresh)

    def at(self, at_ms: int | None) -> int:
        """``at_ms`` as an int, or now from the clock when None."""
        return self.clock() if at_ms is None else int(at_ms)

    def read(self) -> AbstractContextManager[Connection]:
        """A connection for reads (inside ``transaction()``: the outer transaction's)."""
        return self.engine.connect()

    @contextmanager
    def write(self, model_id: str | None = None) -> Iterator[Connection]:
        """A transaction for one change: committed when the block ends, rolled back when it raises
        (inside ``transaction()`` it joins the outer one). With ``model_id``: NotFound first unless that
        model exists."""
        with self.engine.begin() as conn:
            if model_id is not None:
                rows.model_exists(conn, model_id)
            yield conn
        if not isinstance(self.engine, _OneConnection):  # in transaction(): counted at its commit
            self.changes.bump()

    @contextmanager
    def transaction(self) -> Iterator[RegistryCore]:
        """A core whose ``write()`` and ``read()`` share one transaction: committed when the block ends,
        rolled back (nothing changed) when it raises. For one caller at a time (e.g. applying a config)."""
        with self.engine.begin() as conn:
            core = copy.copy(self)
            core.engine = _OneConnection(conn)  # type: ignore[assignment]
            yield core
        self.changes.bump()

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()

    def event(
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
        """Insert an event of ``kind`` (one of ``EVENT_KINDS``, else InvalidValue) and return it."""
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
