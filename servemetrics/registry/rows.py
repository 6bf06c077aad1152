"""Row readers several parts of the registry share: models, organizations, environments (with the
pointers their latest promotion gives them), promotions and deployments.

Plain functions over an open ``Connection`` (the caller's transaction), so each part reaches them without
reaching into another part. Times are epoch ms.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, select

from servemetrics.registry import tables as t
from servemetrics.registry.records import Conflict, EnvironmentInfo, NotFound, PromotionInfo


def model_exists(conn: Connection, model_id: str) -> None:
    """Raise NotFound unless model ``model_id`` exists."""
    if conn.execute(select(t.models.c.id).where(t.models.c.id == model_id)).first() is None:
        raise NotFound(f"no model {model_id!r}")


def organization_id(conn: Connection, name: str) -> int | None:
    """The id of organization ``name`` or None."""
    query = select(t.organizations.c.id).where(t.organizations.c.name == name)
    return conn.execute(query).scalar_one_or_none()


def must_organization(conn: Connection, name: str) -> int:
    """The id of organization ``name``; NotFound if there is none."""
    found = organization_id(conn, name)
    if found is None:
        raise NotFound(f"no organization {name!r}")
    return int(found)


def team_ids(conn: Connection, org_id: int) -> list[str]:
    """The public ids of the organization's teams, sorted."""
    query = select(t.teams.c.team_id).where(t.teams.c.organization_id == org_id)
    return sorted(r.team_id for r in conn.execute(query))


def deployment_exists(conn: Connection, deployment_id: str) -> bool:
    """Whether any model has a deployment with id ``deployment_id`` (ids are unique in the registry)."""
    d = t.deployments
    return conn.execute(select(d.c.id).where(d.c.id == deployment_id)).first() is not None


def trainer_exists(conn: Connection, trainer_id: str) -> bool:
    """Whether any organization has a trainer (Loops) deployment with id ``trainer_id``."""
    td = t.trainer_deployments
    return conn.execute(select(td.c.id).where(td.c.id == trainer_id)).first() is not None


def id_taken(what: str, value: str) -> Conflict:
    """The one Conflict for an id already in use: ``<what> id '<value>' is taken; choose another id``.

    The same words whoever holds the id (the caller's organization or another) and whichever kind
    (model deployments and trainer deployments share one id space: their series carry the id as
    ``deployment_id``), so the refusal tells nothing about another organization (docs/management.md
    "Ids are global")."""
    return Conflict(f"{what} id {value!r} is taken; choose another id")


def deployment_of(conn: Connection, model_id: str, deployment_id: str) -> Row[Any] | None:
    """The id row of deployment ``deployment_id`` if it is ``model_id``'s, else None."""
    d = t.deployments
    return conn.execute(select(d.c.id).where(d.c.id == deployment_id, d.c.model_id == model_id)).first()


def deployment_name(conn: Connection, deployment_id: str | None) -> str | None:
    """Display name of ``deployment_id`` (None when None or unknown)."""
    if deployment_id is None:
        return None
    d = t.deployments
    return conn.execute(select(d.c.name).where(d.c.id == deployment_id)).scalar_one_or_none()


def promotion_info(r: Row[Any]) -> PromotionInfo:
    """A ``promotions`` row as a ``PromotionInfo``."""
    return PromotionInfo(
        r.id,
        r.environment_id,
        r.deployment_id,
        r.previous_deployment_id,
        r.started_at_ms,
        r.ended_at_ms,
        r.rolling,
        r.status,
        r.percent_traffic_to_new_version,
        r.error_message,
    )


def promotion_by_id(conn: Connection, promotion_id: int) -> PromotionInfo:
    """Promotion ``promotion_id`` (it must exist)."""
    p = t.promotions
    return promotion_info(conn.execute(select(p).where(p.c.id == promotion_id)).one())


def latest_promotion(conn: Connection, env_id: int) -> PromotionInfo | None:
    """The environment's newest promotion, or None if it never had one."""
    p = t.promotions
    row = conn.execute(select(p).where(p.c.environment_id == env_id).order_by(p.c.id.desc()).limit(1)).first()
    return promotion_info(row) if row else None


def env_row(conn: Connection, model_id: str, name: str) -> Row[Any] | None:
    """The ``environments`` row ``name`` of ``model_id``, or None."""
    e = t.environments
    return conn.execute(select(e).where(e.c.model_id == model_id, e.c.name == name)).first()


def must_env(conn: Connection, model_id: str, name: str) -> Row[Any]:
    """The ``environments`` row ``name`` of ``model_id``; NotFound if there is none."""
    row = env_row(conn, model_id, name)
    if row is None:
        raise NotFound(f"model {model_id!r} has no environment {name!r}")
    return row


def env_info(conn: Connection, row: Row[Any]) -> EnvironmentInfo:
    """An ``environments`` row with its pointers: the latest promotion decides (SUCCEEDED: its deployment
    is current, otherwise its previous deployment is; one in progress names its candidate)."""
    latest = latest_promotion(conn, row.id)
    current, candidate, running = None, None, None
    if latest is not None:
        running = latest if latest.in_progress else None
        current = latest.deployment_id if latest.status == "SUCCEEDED" else latest.previous_deployment_id
        candidate = latest.deployment_id if running else None
    return EnvironmentInfo(
        row.id,
        row.model_id,
        row.name,
        row.created_at_ms,
        row.active,
        row.promotion_settings,
        row.autoscaling_settings,
        current,
        candidate,
        running,
    )
