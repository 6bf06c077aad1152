"""The deployments part of the registry: deployments, their autoscaling settings and instance types,
replicas and scrape targets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Row, func, insert, select, update

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.events import deployment_context
from servemetrics.registry.records import (
    AUTOSCALING_RANGES,
    NULLABLE_AUTOSCALING,
    AutoscalingSettings,
    DeploymentInfo,
    InvalidValue,
    NotFound,
    ReplicaInfo,
)
from servemetrics.registry.replica_rows import (
    replace_targets,
    replica_info,
    replica_row,
    status_details,
    write_status,
)
from servemetrics.registry.startups import begin_lifecycle, end_open

_AUTOSCALING_FIELDS = tuple(AUTOSCALING_RANGES)


def instance_type_name(gpu_type: str | None, gpu_count: int) -> str:
    """The default instance type name: ``<count>x<gpu>`` (``1xH100``) or ``CPU``."""
    return f"{gpu_count}x{gpu_type}" if gpu_type and gpu_count else "CPU"


def check_autoscaling(values: Mapping[str, Any]) -> dict[str, int | None]:
    """Validate autoscaling fields; return them as ints (or None where a field may be null,
    ``NULLABLE_AUTOSCALING``). Raises InvalidValue naming the bad field."""
    out: dict[str, int | None] = {}
    for name, value in values.items():
        if name not in AUTOSCALING_RANGES:
            raise InvalidValue(f"unknown autoscaling setting {name!r}; use {', '.join(_AUTOSCALING_FIELDS)}")
        low, high = AUTOSCALING_RANGES[name]
        if value is None and name in NULLABLE_AUTOSCALING:
            out[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            null = " or null" if name in NULLABLE_AUTOSCALING else ""
            raise InvalidValue(
                f"autoscaling setting {name} must be an integer {low}..{high}{null}, not {value!r}"
            )
        out[name] = value
    return out


def _deployment_info(r: Row[Any], active_replicas: int) -> DeploymentInfo:
    autoscaling = AutoscalingSettings(**{f: getattr(r, f) for f in _AUTOSCALING_FIELDS})
    return DeploymentInfo(
        r.id,
        r.model_id,
        r.name,
        r.created_at_ms,
        r.status,
        r.instance_type_name,
        r.gpu_type,
        r.gpu_count,
        autoscaling,
        r.request_backpressure_policy,
        dict(r.labels or {}),
        active_replicas,
        r.autoscaling_set_at_ms is not None,
    )


class Deployments:
    """Deployments, autoscaling, instance types, replicas and targets, over a ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    def _deployment_event(
        self, conn: Connection, model_id: str, kind: str, at: int, deployment_id: str, details: dict[str, Any]
    ) -> None:
        """Record ``kind`` about ``deployment_id`` with ``details`` plus what a hover needs:
        ``deployment_id``, ``deployment_name`` and ``environment`` (the one it serves, also the event's
        ``environment``; docs/dashboard-api.md "Events")."""
        context = deployment_context(conn, model_id, deployment_id)
        self._core.event(
            conn,
            model_id,
            kind,
            at,
            deployment_id=deployment_id,
            environment=context["environment"],
            details={**context, **details},
        )

    def create_deployment(
        self,
        model_id: str,
        deployment_id: str,
        name: str,
        *,
        gpu_type: str | None = None,
        gpu_count: int = 0,
        instance_type: str | None = None,
        status: str = "ACTIVE",
        environment: str | None = None,
        at_ms: int | None = None,
    ) -> DeploymentInfo:
        """Create a deployment and record DEPLOYED (details: name, instance type, target environment).

        ``instance_type`` defaults to ``instance_type_name(gpu_type, gpu_count)``. Raises NotFound (no such
        model), Conflict (the id is a deployment's or a trainer deployment's of any organization:
        ``rows.id_taken``) or InvalidValue (unknown status).
        """
        if status not in t.DEPLOYMENT_STATUSES:
            raise InvalidValue(
                f"unknown deployment status {status!r}; use {', '.join(t.DEPLOYMENT_STATUSES)}"
            )
        at = self._core.at(at_ms)
        itype = instance_type or instance_type_name(gpu_type, gpu_count)
        with self._core.write(model_id) as conn:
            if rows.deployment_exists(conn, deployment_id) or rows.trainer_exists(conn, deployment_id):
                raise rows.id_taken("deployment", deployment_id)
            new = {
                "instance_type_name": itype,
                "gpu_type": gpu_type,
                "gpu_count": gpu_count,
                "status": status,
            }
            conn.execute(
                insert(t.deployments).values(
                    id=deployment_id, model_id=model_id, name=name, created_at_ms=at, **new
                )
            )
            details = _deployed_details(deployment_id, name, environment, new)
            self._core.event(
                conn,
                model_id,
                "DEPLOYED",
                at,
                deployment_id=deployment_id,
                environment=environment,
                details=details,
            )
        return self._must_deployment(model_id, deployment_id)

    def deployment(self, model_id: str, deployment_id: str) -> DeploymentInfo | None:
        """Deployment ``deployment_id`` of ``model_id``; None if missing or of another model."""
        with self._core.read() as conn:
            return self._deployment(conn, model_id, deployment_id)

    def _deployment(self, conn: Connection, model_id: str, deployment_id: str) -> DeploymentInfo | None:
        d = t.deployments
        row = conn.execute(select(d).where(d.c.id == deployment_id, d.c.model_id == model_id)).first()
        if row is None:
            return None
        return _deployment_info(row, self._active_replicas(conn, deployment_id))

    def _must_deployment(
        self, model_id: str, deployment_id: str, conn: Connection | None = None
    ) -> DeploymentInfo:
        found = (
            self._deployment(conn, model_id, deployment_id)
            if conn
            else self.deployment(model_id, deployment_id)
        )
        if found is None:
            raise NotFound(f"model {model_id!r} has no deployment {deployment_id!r}")
        return found

    @staticmethod
    def _active_replicas(conn: Connection, deployment_id: str) -> int:
        r = t.replicas
        query = select(func.count()).where(r.c.deployment_id == deployment_id, r.c.status == "ACTIVE")
        return int(conn.execute(query).scalar_one())

    def list_deployments(self, model_id: str, name: str | None = None) -> list[DeploymentInfo]:
        """Deployments of ``model_id`` (optionally only those named ``name``), oldest first."""
        d = t.deployments
        query = select(d).where(d.c.model_id == model_id)
        if name is not None:
            query = query.where(d.c.name == name)
        with self._core.read() as conn:
            rows = conn.execute(query.order_by(d.c.created_at_ms, d.c.id)).all()
            return [_deployment_info(r, self._active_replicas(conn, r.id)) for r in rows]

    def _set_status(
        self, model_id: str, deployment_id: str, status: str, kind: str, at_ms: int | None
    ) -> bool:
        with self._core.write() as conn:
            before = self._must_deployment(model_id, deployment_id, conn)
            if before.status == status:
                return False
            conn.execute(
                update(t.deployments).where(t.deployments.c.id == deployment_id).values(status=status)
            )
            details = {"old": {"status": before.status}, "new": {"status": status}}
            self._deployment_event(conn, model_id, kind, self._core.at(at_ms), deployment_id, details)
            return True

    def activate_deployment(self, model_id: str, deployment_id: str, at_ms: int | None = None) -> bool:
        """Set status ACTIVE and record ACTIVATED; False (nothing recorded) if already ACTIVE. NotFound if
        the model has no such deployment."""
        return self._set_status(model_id, deployment_id, "ACTIVE", "ACTIVATED", at_ms)

    def deactivate_deployment(self, model_id: str, deployment_id: str, at_ms: int | None = None) -> bool:
        """Set status INACTIVE and record DEACTIVATED; False if already INACTIVE. NotFound if the model
        has no such deployment."""
        return self._set_status(model_id, deployment_id, "INACTIVE", "DEACTIVATED", at_ms)

    def update_autoscaling(
        self, model_id: str, deployment_id: str, changes: Mapping[str, Any], at_ms: int | None = None
    ) -> str:
        """Apply the given fields; record AUTOSCALING_CHANGED ``{old, new}``. Returns ACCEPTED or UNCHANGED.
        Either way the settings are known from then on (``DeploymentInfo.autoscaling_known``).

        Raises InvalidValue for an unknown field, a value out of range or ``min_replica > max_replica``;
        NotFound if the model has no such deployment.
        """
        values = check_autoscaling(changes)
        with self._core.write() as conn:
            old = self._must_deployment(model_id, deployment_id, conn).autoscaling.as_dict()
            new = {**old, **values}
            low, high = new["min_replica"], new["max_replica"]
            if low is not None and high is not None and low > high:
                raise InvalidValue(
                    f"min_replica ({new['min_replica']}) must not exceed max_replica ({new['max_replica']})"
                )
            when = self._core.at(at_ms)
            row = update(t.deployments).where(t.deployments.c.id == deployment_id)
            conn.execute(row.values(**values, autoscaling_set_at_ms=when))  # known from now on
            if new == old:
                return "UNCHANGED"
            self._deployment_event(
                conn,
                model_id,
                "AUTOSCALING_CHANGED",
                when,
                deployment_id,
                {"old": old, "new": new},
            )
        return "ACCEPTED"

    def set_instance_type(
        self,
        model_id: str,
        deployment_id: str,
        gpu_type: str | None,
        gpu_count: int,
        name: str | None = None,
        at_ms: int | None = None,
    ) -> bool:
        """Change the instance type; record INSTANCE_TYPE_CHANGED ``{old, new}``. False if unchanged.

        ``name`` defaults to ``instance_type_name(gpu_type, gpu_count)``. NotFound if the model has no such
        deployment.
        """
        new = {
            "instance_type_name": name or instance_type_name(gpu_type, gpu_count),
            "gpu_type": gpu_type,
            "gpu_count": gpu_count,
        }
        with self._core.write() as conn:
            d = self._must_deployment(model_id, deployment_id, conn)
            old = {
                "instance_type_name": d.instance_type_name,
                "gpu_type": d.gpu_type,
                "gpu_count": d.gpu_count,
            }
            if old == new:
                return False
            conn.execute(update(t.deployments).where(t.deployments.c.id == deployment_id).values(**new))
            self._deployment_event(
                conn,
                model_id,
                "INSTANCE_TYPE_CHANGED",
                self._core.at(at_ms),
                deployment_id,
                {"old": old, "new": new},
            )
            return True

    def rename_deployment(self, model_id: str, deployment_id: str, name: str) -> None:
        """Change a deployment's display name (no event); NotFound if the model has no such deployment."""
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            conn.execute(update(t.deployments).where(t.deployments.c.id == deployment_id).values(name=name))

    def set_request_backpressure(self, model_id: str, deployment_id: str, policy: str | None) -> None:
        """Set ``request_backpressure_settings.policy`` (QUEUE_ON_FULL, REJECT_ON_FULL or None).

        Raises InvalidValue (another policy) or NotFound (the model has no such deployment).
        """
        if policy is not None and policy not in t.BACKPRESSURE_POLICIES:
            raise InvalidValue(f"unknown policy {policy!r}; use {', '.join(t.BACKPRESSURE_POLICIES)} or null")
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            conn.execute(
                update(t.deployments)
                .where(t.deployments.c.id == deployment_id)
                .values(request_backpressure_policy=policy)
            )

    # -- replicas and targets ---------------------------------------------------------------------

    def ensure_replica(
        self,
        model_id: str,
        deployment_id: str,
        replica_id: str,
        status: str = "ACTIVE",
        at_ms: int | None = None,
    ) -> ReplicaInfo:
        """Replica ``replica_id`` of the deployment, created with ``status`` (at ``at_ms``) if missing.

        Raises InvalidValue (unknown status) or NotFound (the model has no such deployment).
        """
        if status not in t.REPLICA_STATUSES:
            raise InvalidValue(f"unknown replica status {status!r}; use {', '.join(t.REPLICA_STATUSES)}")
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            row = replica_row(conn, deployment_id, replica_id)
            if row is None:
                at = self._core.at(at_ms)
                conn.execute(
                    insert(t.replicas).values(
                        deployment_id=deployment_id, name=replica_id, status=status, created_at_ms=at
                    )
                )
                if status not in t.ENDED_REPLICA_STATUSES:
                    begin_lifecycle(conn, deployment_id, replica_id, at)
                row = replica_row(conn, deployment_id, replica_id)
            assert row is not None
            return replica_info(row, deployment_id)

    def list_replicas(self, model_id: str, deployment_id: str) -> list[ReplicaInfo]:
        """Replicas of the deployment, by name; NotFound if the model has no such deployment."""
        with self._core.read() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            rows = conn.execute(
                select(t.replicas)
                .where(t.replicas.c.deployment_id == deployment_id)
                .order_by(t.replicas.c.name)
            )
            return [replica_info(r, deployment_id) for r in rows]

    def terminate_replica(
        self, model_id: str, deployment_id: str, replica_id: str, at_ms: int | None = None
    ) -> ReplicaInfo:
        """Mark the replica TERMINATED and record REPLICA_TERMINATED. NotFound if it does not exist."""
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            row = replica_row(conn, deployment_id, replica_id)
            if row is None:
                raise NotFound(f"deployment {deployment_id!r} has no replica {replica_id!r}")
            if row.status != "TERMINATED":
                write_status(conn, row, "TERMINATED", at)
                end_open(conn, deployment_id, replica_id, at)
                details = status_details(row, "TERMINATED")
                self._deployment_event(conn, model_id, "REPLICA_TERMINATED", at, deployment_id, details)
            row = replica_row(conn, deployment_id, replica_id)
            assert row is not None
            return replica_info(row, deployment_id)

    def set_replica_status(
        self,
        model_id: str,
        deployment_id: str,
        replica_id: str,
        status: str,
        reason: str | None = None,
        at_ms: int | None = None,
        only_from: tuple[str, ...] = t.REPLICA_STATUSES,
    ) -> bool:
        """Set a replica's status (a health checker's verdict); False if unchanged, or if its status is
        not one of ``only_from`` (a replica terminated meanwhile is neither failed nor revived).

        FAILED and TERMINATED set ``terminated_at_ms``, ACTIVE or STARTING clear it. A change into
        FAILED or TERMINATED, or out of them (a failed replica healthy again), records
        REPLICA_TERMINATED with ``details {replica, old_status, status, reason}``. NotFound if the
        replica does not exist, InvalidValue for a status not in ``REPLICA_STATUSES``.
        """
        if status not in t.REPLICA_STATUSES:
            raise InvalidValue(f"unknown replica status {status!r}; use {', '.join(t.REPLICA_STATUSES)}")
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            row = replica_row(conn, deployment_id, replica_id)
            if row is None:
                raise NotFound(f"deployment {deployment_id!r} has no replica {replica_id!r}")
            if row.status == status or row.status not in only_from:
                return False
            self._change_status(conn, model_id, deployment_id, row, status, at, reason)
            return True

    def _change_status(
        self,
        conn: Connection,
        model_id: str,
        deployment_id: str,
        row: Row[Any],
        status: str,
        at: int,
        reason: str | None,
    ) -> None:
        """Write ``status`` and record the change into an ended status (FAILED, TERMINATED) as
        REPLICA_TERMINATED, out of one as REPLICA_RECOVERED (``tables.EVENT_KINDS``)."""
        write_status(conn, row, status, at)
        if status in t.ENDED_REPLICA_STATUSES:
            end_open(conn, deployment_id, row.name, at)
        if {status, row.status} & t.ENDED_REPLICA_STATUSES:
            details = status_details(row, status, reason=reason)
            ended = status in t.ENDED_REPLICA_STATUSES
            kind = "REPLICA_TERMINATED" if ended else "REPLICA_RECOVERED"
            self._deployment_event(conn, model_id, kind, at, deployment_id, details)

    def register_replica(
        self, model_id: str, deployment_id: str, replica_id: str, urls: list[str], at_ms: int | None = None
    ) -> tuple[ReplicaInfo, bool]:
        """Register replica ``replica_id`` with scrape targets ``urls`` (kind ``replica``): create it
        ACTIVE, or update the one there (docs/management.md "Creating … replicas"): its targets become
        ``urls`` (those not listed are removed), and a FAILED or TERMINATED replica becomes ACTIVE again
        (REPLICA_RECOVERED recorded, ``reason`` "registered again"). A new or re-registered replica
        starts a startup attempt (``startups.begin_lifecycle``). One transaction.

        Returns (the replica, True if it was created). NotFound if the model has no such deployment.
        """
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            self._must_deployment(model_id, deployment_id, conn)
            row = replica_row(conn, deployment_id, replica_id)
            created = row is None
            if row is None:
                conn.execute(
                    insert(t.replicas).values(
                        deployment_id=deployment_id, name=replica_id, status="ACTIVE", created_at_ms=at
                    )
                )
                begin_lifecycle(conn, deployment_id, replica_id, at)
            elif row.status in t.ENDED_REPLICA_STATUSES:
                self._change_status(conn, model_id, deployment_id, row, "ACTIVE", at, "registered again")
                begin_lifecycle(conn, deployment_id, replica_id, at)
            row = replica_row(conn, deployment_id, replica_id)
            assert row is not None
            replace_targets(conn, row.id, urls)
            return replica_info(row, deployment_id), created

    def ensure_target(
        self,
        model_id: str,
        deployment_id: str,
        replica_id: str,
        url: str,
        *,
        kind: str = "replica",
        labels: dict[str, str] | None = None,
    ) -> None:
        """Attach scrape target ``url`` to the replica (created ACTIVE if missing); updates kind, labels.

        NotFound if the model has no such deployment.
        """
        self.ensure_replica(model_id, deployment_id, replica_id)
        with self._core.write() as conn:
            replica = replica_row(conn, deployment_id, replica_id)
            assert replica is not None
            tg = t.targets
            where = (tg.c.replica_id == replica.id) & (tg.c.url == url)
            if conn.execute(select(tg.c.id).where(where)).first():
                conn.execute(update(tg).where(where).values(kind=kind, labels=labels or {}))
            else:
                conn.execute(
                    insert(tg).values(replica_id=replica.id, url=url, kind=kind, labels=labels or {})
                )


def _deployed_details(
    deployment_id: str, name: str, environment: str | None, new: dict[str, Any]
) -> dict[str, Any]:
    """The DEPLOYED event's details: the deployment, its target environment, and ``new`` (instance type
    name, GPU type and count, status)."""
    return {
        "deployment_id": deployment_id,
        "deployment_name": name,
        "environment": environment,
        "name": name,
        "instance_type_name": new["instance_type_name"],
        "old": None,
        "new": new,
    }
