"""Ordered, named schema migrations, applied on startup and recorded in ``schema_migrations``.

``migrate(engine)`` applies, in order, every migration whose name is not yet recorded, each in its own
transaction, and returns the names it applied (``[]`` when the schema is current). Running it again is a
no-op. Add a migration by appending ``(name, function)`` to ``MIGRATIONS``; never edit or reorder one
that has shipped.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    MetaData,
    String,
    Table,
    insert,
    inspect,
    select,
    text,
)

from servemetrics.registry import tables as t

_SCHEMA = MetaData()
schema_migrations = Table(
    "schema_migrations",
    _SCHEMA,
    Column("name", String(200), primary_key=True),
    Column("applied_at_ms", BigInteger, nullable=False),
)


def _initial(conn: Connection) -> None:
    t.METADATA.create_all(conn)


def _pepper(conn: Connection) -> None:
    conn.execute(insert(t.registry_secrets).values(name="key_pepper", value=secrets.token_hex(32)))


def _async_requests(conn: Connection) -> None:
    t.async_requests.create(conn, checkfirst=True)


def _trainer_deployments(conn: Connection) -> None:
    for table in (t.trainer_deployments, t.trainer_nodes, t.trainer_targets):
        table.create(conn, checkfirst=True)


def _target_in_flight_tokens(conn: Connection) -> None:
    """``deployments.target_in_flight_tokens`` (nullable), unless ``_initial`` made it already."""
    if "target_in_flight_tokens" not in {c["name"] for c in inspect(conn).get_columns("deployments")}:
        conn.execute(text("ALTER TABLE deployments ADD COLUMN target_in_flight_tokens INTEGER"))


def _autoscaling_set_at(conn: Connection) -> None:
    """``deployments.autoscaling_set_at_ms`` (nullable), unless ``_initial`` made it already."""
    if "autoscaling_set_at_ms" not in {c["name"] for c in inspect(conn).get_columns("deployments")}:
        conn.execute(text("ALTER TABLE deployments ADD COLUMN autoscaling_set_at_ms BIGINT"))


def _startup_attempts(conn: Connection) -> None:
    t.startup_attempts.create(conn, checkfirst=True)


def _model_apis(conn: Connection) -> None:
    """``teams``, ``model_apis`` and ``api_keys.team_id`` (nullable), unless ``_initial`` made them."""
    t.teams.create(conn, checkfirst=True)
    t.model_apis.create(conn, checkfirst=True)
    if "team_id" not in {c["name"] for c in inspect(conn).get_columns("api_keys")}:
        conn.execute(text("ALTER TABLE api_keys ADD COLUMN team_id VARCHAR(100)"))


MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("0001_initial_tables", _initial),
    ("0002_api_key_pepper", _pepper),
    ("0003_async_requests", _async_requests),
    ("0004_trainer_deployments", _trainer_deployments),
    ("0005_target_in_flight_tokens", _target_in_flight_tokens),
    ("0006_autoscaling_set_at", _autoscaling_set_at),
    ("0007_startup_attempts", _startup_attempts),
    ("0008_model_apis", _model_apis),
]


def applied(engine: Engine) -> list[str]:
    """Names of the migrations already applied, in the order they were applied."""
    _SCHEMA.create_all(engine)
    with engine.connect() as conn:
        rows = conn.execute(select(schema_migrations.c.name).order_by(schema_migrations.c.applied_at_ms))
        return [r.name for r in rows]


def migrate(engine: Engine, now_ms: int = 0) -> list[str]:
    """Apply every pending migration in order; return the names applied now."""
    done = set(applied(engine))
    ran: list[str] = []
    for index, (name, step) in enumerate(MIGRATIONS):
        if name in done:
            continue
        with engine.begin() as conn:
            step(conn)
            conn.execute(insert(schema_migrations).values(name=name, applied_at_ms=now_ms + index))
        ran.append(name)
    return ran
