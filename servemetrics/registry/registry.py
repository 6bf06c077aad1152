"""``Registry``: models, deployments, environments, promotions, replicas, targets, events and API keys.

The registry is composed of parts, one module each, over one shared ``RegistryCore`` (engine, clock,
key pepper, event recording): ``tenancy``, ``deployments``, ``environments``, ``events`` and
``trainers``. Every method opens its own transaction, so a Registry can be shared by threads; reads that
span parts (``list_targets``) are the Registry's own. Times are epoch ms; methods that change state take
``at_ms`` (default: now from the clock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.engine import make_url

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.deployments import Deployments
from servemetrics.registry.environments import Environments
from servemetrics.registry.events import Events
from servemetrics.registry.model_apis import ModelApis
from servemetrics.registry.records import TargetInfo
from servemetrics.registry.startups import Startups
from servemetrics.registry.tenancy import Tenancy
from servemetrics.registry.trainers import Trainers
from servemetrics.timeutil import wall_clock_ms


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def create_registry_engine(url: str) -> Engine:
    """An engine for ``sqlite:///path`` (parent directory created, foreign keys on) or ``postgresql+psycopg://``."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


class Registry:
    """The registry over a SQLAlchemy ``engine``; pending migrations are applied on construction.

    Its parts: ``tenancy`` (organizations, API keys, models), ``deployments`` (deployments, replicas,
    scrape targets), ``environments`` (environments, promotions, the serving timeline), ``events``,
    ``trainers`` (trainer deployments), ``startups`` (replicas' startup attempts) and ``model_apis``
    (teams and Model APIs), all over one
    ``RegistryCore``.
    """

    tenancy: Tenancy
    deployments: Deployments
    environments: Environments
    events: Events
    trainers: Trainers
    startups: Startups
    model_apis: ModelApis

    def __init__(
        self, engine: Engine, clock: Callable[[], int] = wall_clock_ms, pepper: str | None = None
    ) -> None:
        self._compose(RegistryCore(engine, clock, pepper))

    def _compose(self, core: RegistryCore) -> None:
        self._core = core
        self.tenancy = Tenancy(core)
        self.deployments = Deployments(core)
        self.environments = Environments(core)
        self.events = Events(core)
        self.trainers = Trainers(core)
        self.startups = Startups(core)
        self.model_apis = ModelApis(core)

    @classmethod
    def open(cls, url: str, clock: Callable[[], int] = wall_clock_ms, pepper: str | None = None) -> Registry:
        """Open (and migrate) the registry at ``url``: ``sqlite:///path`` or ``postgresql+psycopg://...``;
        ``pepper``: the API key pepper given from outside (None: the registry's own). Raises
        ``KeyPepperError`` when the pepper does not fit the registry (``registry.pepper``)."""
        return cls(create_registry_engine(url), clock, pepper)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (other tables in the same database use it, e.g. the gateway's)."""
        return self._core.engine

    @property
    def version(self) -> int:
        """How many writes through this registry have committed (``ChangeCounter``)."""
        return self._core.changes.value

    @property
    def listeners(self) -> list[Callable[[], None]]:
        """Called after each committed write, in the writing thread (``ChangeCounter``)."""
        return self._core.changes.listeners

    @contextmanager
    def transaction(self) -> Iterator[Registry]:
        """A registry whose parts share one transaction: committed when the block ends, rolled back
        (nothing changed) when it raises. For one caller at a time (e.g. applying a config)."""
        with self._core.transaction() as core:
            view = Registry.__new__(Registry)
            view._compose(core)
            yield view

    def close(self) -> None:
        """Release the engine's connections."""
        self._core.close()

    def _phases(self) -> dict[str, tuple[str, str]]:
        """deployment id -> (environment name, rollout phase) for deployments serving an environment."""
        out: dict[str, tuple[str, str]] = {}
        with self._core.read() as conn:
            found = conn.execute(select(t.environments).order_by(t.environments.c.name)).all()
            for row in found:
                env = rows.env_info(conn, row)
                if env.candidate_deployment_id:
                    out.setdefault(env.candidate_deployment_id, (env.name, "promoting"))
                if env.current_deployment_id:
                    phase = "promoting" if env.candidate_deployment_id else "stable"
                    out.setdefault(env.current_deployment_id, (env.name, phase))
        return out

    def list_targets(self, statuses: Iterable[str] = t.SERVING_REPLICA_STATUSES) -> list[TargetInfo]:
        """Every scrape target of a replica whose status is one of ``statuses`` (by default STARTING or
        ACTIVE: those scraped and routed to), with the labels to attach and the replica's status."""
        tg, r, d, m = t.targets, t.replicas, t.deployments, t.models
        query = (
            select(
                tg.c.url,
                tg.c.kind,
                tg.c.labels,
                r.c.name.label("replica"),
                r.c.status.label("replica_status"),
                d.c.id.label("deployment_id"),
                m.c.id.label("model_id"),
                m.c.name.label("model_name"),
            )
            .join(r, tg.c.replica_id == r.c.id)
            .join(d, r.c.deployment_id == d.c.id)
            .join(m, d.c.model_id == m.c.id)
            .where(r.c.status.in_(tuple(statuses)))
            .order_by(m.c.id, d.c.id, r.c.name, tg.c.id)
        )
        phases = self._phases()
        with self._core.read() as conn:
            found = conn.execute(query).all()
        return [
            TargetInfo(
                row.url,
                row.model_id,
                row.model_name,
                row.deployment_id,
                row.replica,
                *phases.get(row.deployment_id, ("", "")),
                kind=row.kind,
                labels=dict(row.labels or {}),
                replica_status=row.replica_status,
            )
            for row in found
        ]
