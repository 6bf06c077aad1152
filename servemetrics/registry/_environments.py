"""Environments, their activation history and promotions (instant and rolling)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, insert, select, update

from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryBase
from servemetrics.registry._deployments import check_autoscaling
from servemetrics.registry.events import deployment_name, environment_context
from servemetrics.registry.records import (
    MAX_SETTING,
    Conflict,
    EnvironmentInfo,
    InvalidValue,
    NotFound,
    PromotionInfo,
)

DEFAULT_PROMOTION_SETTINGS: dict[str, Any] = {
    "redeploy_on_promotion": False,
    "rolling_deploy": False,
    "promotion_cleanup_strategy": "SCALE_TO_ZERO",
    "rolling_deploy_config": {
        "rolling_deploy_strategy": "REPLICA",
        "max_surge_percent": 25,
        "max_unavailable_percent": 0,
        "stabilization_time_seconds": 0,
        "replica_overhead_percent": 0,
    },
    "ramp_up_while_promoting": False,
    "ramp_up_duration_seconds": 600,
}
"""``PromotionSettingsV1`` defaults (platform-facts §4)."""


PROMOTION_CLEANUP_STRATEGIES = ("KEEP", "SCALE_TO_ZERO", "DEACTIVATE")
ROLLING_DEPLOY_STRATEGIES = ("REPLICA",)
_SETTING_INTS: dict[str, tuple[int, int]] = {
    "ramp_up_duration_seconds": (0, MAX_SETTING),
    "max_surge_percent": (0, 100),
    "max_unavailable_percent": (0, 100),
    "stabilization_time_seconds": (0, MAX_SETTING),
    "replica_overhead_percent": (0, 100),
}
_SETTING_CHOICES: dict[str, tuple[str, ...]] = {
    "promotion_cleanup_strategy": PROMOTION_CLEANUP_STRATEGIES,
    "rolling_deploy_strategy": ROLLING_DEPLOY_STRATEGIES,
}


def _check_setting(where: str, name: str, value: Any, default: Any) -> None:
    """Raise InvalidValue unless ``value`` has the type (and range or choices) of ``default``."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InvalidValue(f"{where}{name} must be true or false, not {value!r}")
    elif isinstance(default, int):
        low, high = _SETTING_INTS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidValue(f"{where}{name} must be an integer {low}..{high}, not {value!r}")
    elif name in _SETTING_CHOICES and value not in _SETTING_CHOICES[name]:
        raise InvalidValue(f"{where}{name} must be one of {', '.join(_SETTING_CHOICES[name])}, not {value!r}")


def _check_settings(where: str, changes: Any, defaults: dict[str, Any]) -> None:
    if not isinstance(changes, dict):
        raise InvalidValue(f"{where.rstrip('.') or 'promotion_settings'} must be an object, not {changes!r}")
    unknown = sorted(set(changes) - set(defaults))
    if unknown:
        raise InvalidValue(
            f"unknown {where.rstrip('.') or 'promotion'} settings {', '.join(unknown)}; "
            f"use {', '.join(defaults)}"
        )
    for name, value in changes.items():
        if isinstance(defaults[name], dict):
            _check_settings(f"{where}{name}.", value, defaults[name])
        else:
            _check_setting(where, name, value, defaults[name])


def merge_promotion_settings(base: dict[str, Any], changes: dict[str, Any] | None) -> dict[str, Any]:
    """``base`` with ``changes`` applied (``rolling_deploy_config`` merged field by field).

    Raises InvalidValue for an unknown setting or a value of the wrong type or out of range.
    """
    _check_settings("", changes or {}, DEFAULT_PROMOTION_SETTINGS)
    out = {**base, **(changes or {})}
    rolling = (changes or {}).get("rolling_deploy_config")
    if rolling is not None:
        out["rolling_deploy_config"] = {**base["rolling_deploy_config"], **rolling}
    return out


def merge_autoscaling_settings(
    base: dict[str, Any] | None, changes: dict[str, Any] | None
) -> dict[str, Any] | None:
    """An environment's autoscaling settings ``base`` with ``changes`` applied (None = none set).

    Raises InvalidValue for an unknown field, a value out of range or ``min_replica > max_replica``.
    """
    if changes is None:
        return base
    if not isinstance(changes, dict):
        raise InvalidValue(f"autoscaling_settings must be an object, not {changes!r}")
    out = {**(base or {}), **check_autoscaling(changes)}
    low, high = out.get("min_replica", 0), out.get("max_replica")
    if high is not None and low > high:
        raise InvalidValue(f"min_replica ({low}) must not exceed max_replica ({high})")
    return out


def _promotion(r: Row) -> PromotionInfo:
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


def status_for(percent: int) -> str:
    """The status of a running promotion at ``percent``: RELEASING at 0, RAMPING_UP < 100, else SUCCEEDED."""
    return "RELEASING" if percent == 0 else "RAMPING_UP" if percent < 100 else "SUCCEEDED"


class EnvironmentsMixin(RegistryBase):
    """Environments, activation and promotions."""

    def _environment_event(
        self, conn: Connection, model_id: str, kind: str, at: int, env_name: str, details: dict[str, Any]
    ) -> None:
        """Record ``kind`` about environment ``env_name`` with ``details`` plus ``environment`` and the
        deployment it points at (``deployment_id``, ``deployment_name``; docs/dashboard-api.md "Events")."""
        self._event(
            conn,
            model_id,
            kind,
            at,
            environment=env_name,
            details={**environment_context(conn, model_id, env_name), **details},
        )

    def _promotion_details(self, conn: Connection, promotion: PromotionInfo) -> dict[str, Any]:
        """Both deployments of a promotion: ``deployment_id`` / ``deployment_name`` (the promoted one)
        and ``previous_deployment_id`` / ``previous_deployment_name`` (None when the environment had none)."""
        return {
            "deployment_id": promotion.deployment_id,
            "deployment_name": deployment_name(conn, promotion.deployment_id),
            "previous_deployment_id": promotion.previous_deployment_id,
            "previous_deployment_name": deployment_name(conn, promotion.previous_deployment_id),
        }

    def _env_row(self, conn: Connection, model_id: str, name: str) -> Row | None:
        e = t.environments
        return conn.execute(select(e).where(e.c.model_id == model_id, e.c.name == name)).first()

    def _must_env(self, conn: Connection, model_id: str, name: str) -> Row:
        row = self._env_row(conn, model_id, name)
        if row is None:
            raise NotFound(f"model {model_id!r} has no environment {name!r}")
        return row

    def _latest_promotion(self, conn: Connection, env_id: int) -> PromotionInfo | None:
        p = t.promotions
        row = conn.execute(
            select(p).where(p.c.environment_id == env_id).order_by(p.c.id.desc()).limit(1)
        ).first()
        return _promotion(row) if row else None

    def _env_info(self, conn: Connection, row: Row) -> EnvironmentInfo:
        latest = self._latest_promotion(conn, row.id)
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

    def environment(self, model_id: str, env_name: str) -> EnvironmentInfo | None:
        """Environment ``env_name`` of ``model_id``; None if missing (or the model is another's)."""
        with self.engine.connect() as conn:
            row = self._env_row(conn, model_id, env_name)
            return self._env_info(conn, row) if row else None

    def list_environments(self, model_id: str) -> list[EnvironmentInfo]:
        """Environments of ``model_id`` by name."""
        e = t.environments
        with self.engine.connect() as conn:
            rows = conn.execute(select(e).where(e.c.model_id == model_id).order_by(e.c.name)).all()
            return [self._env_info(conn, r) for r in rows]

    def create_environment(
        self,
        model_id: str,
        name: str,
        *,
        promotion_settings: dict[str, Any] | None = None,
        autoscaling_settings: dict[str, Any] | None = None,
        at_ms: int | None = None,
    ) -> EnvironmentInfo:
        """Create an environment; records ENVIRONMENT_UPDATED ``{action: created}``. Conflict if it exists."""
        settings = merge_promotion_settings(DEFAULT_PROMOTION_SETTINGS, promotion_settings)
        autoscaling_settings = merge_autoscaling_settings(None, autoscaling_settings)
        at = self._at(at_ms)
        with self._write() as conn:
            self._model_exists(conn, model_id)
            if self._env_row(conn, model_id, name) is not None:
                raise Conflict(f"model {model_id!r} already has an environment {name!r}")
            conn.execute(
                insert(t.environments).values(
                    model_id=model_id,
                    name=name,
                    created_at_ms=at,
                    active=True,
                    promotion_settings=settings,
                    autoscaling_settings=autoscaling_settings,
                )
            )
            new = {"promotion_settings": settings, "autoscaling_settings": autoscaling_settings}
            details = {"action": "created", "promotion_settings": settings, "old": None, "new": new}
            self._environment_event(conn, model_id, "ENVIRONMENT_UPDATED", at, name, details)
            return self._env_info(conn, self._must_env(conn, model_id, name))

    def update_environment(
        self,
        model_id: str,
        name: str,
        *,
        promotion_settings: dict[str, Any] | None = None,
        autoscaling_settings: dict[str, Any] | None = None,
        at_ms: int | None = None,
    ) -> EnvironmentInfo:
        """Change settings; record ENVIRONMENT_UPDATED ``{action: updated, old, new}`` on a change."""
        with self._write() as conn:
            row = self._must_env(conn, model_id, name)
            old = {
                "promotion_settings": row.promotion_settings,
                "autoscaling_settings": row.autoscaling_settings,
            }
            new = {
                "promotion_settings": merge_promotion_settings(row.promotion_settings, promotion_settings),
                "autoscaling_settings": merge_autoscaling_settings(
                    row.autoscaling_settings, autoscaling_settings
                ),
            }
            if new != old:
                conn.execute(update(t.environments).where(t.environments.c.id == row.id).values(**new))
                details = {"action": "updated", "old": old, "new": new}
                self._environment_event(conn, model_id, "ENVIRONMENT_UPDATED", self._at(at_ms), name, details)
            return self._env_info(conn, self._must_env(conn, model_id, name))

    def _set_env_active(self, model_id: str, name: str, active: bool, at_ms: int | None) -> bool:
        at = self._at(at_ms)
        with self._write() as conn:
            row = self._must_env(conn, model_id, name)
            if row.active == active:
                return False
            conn.execute(update(t.environments).where(t.environments.c.id == row.id).values(active=active))
            conn.execute(
                insert(t.environment_activations).values(environment_id=row.id, at_ms=at, active=active)
            )
            kind = "ACTIVATED" if active else "DEACTIVATED"
            details = {"old": {"active": not active}, "new": {"active": active}}
            self._environment_event(conn, model_id, kind, at, name, details)
            return True

    def activate_environment(self, model_id: str, name: str, at_ms: int | None = None) -> bool:
        """Let the environment serve again; records ACTIVATED. False if it was active."""
        return self._set_env_active(model_id, name, True, at_ms)

    def deactivate_environment(self, model_id: str, name: str, at_ms: int | None = None) -> bool:
        """Stop the environment serving (its timeline is empty from ``at_ms``); records DEACTIVATED."""
        return self._set_env_active(model_id, name, False, at_ms)

    # -- promotions -----------------------------------------------------------------------------

    def promote(
        self,
        model_id: str,
        env_name: str,
        deployment_id: str,
        *,
        percent: int | None = None,
        rolling: bool | None = None,
        at_ms: int | None = None,
        supersede: bool = False,
    ) -> PromotionInfo:
        """Promote ``deployment_id`` into the environment at ``at_ms``; records PROMOTED.

        Instant (the default, or ``rolling=False``): from ``at_ms`` only the new deployment serves.
        Rolling (``rolling=True``, the environment's ``rolling_deploy`` setting, or ``percent`` < 100):
        starts at ``percent`` (default 0) with old and new serving until it reaches 100 or is cancelled.
        Raises Conflict while another promotion is in progress (unless ``supersede``: it is then marked
        CANCELED and the new one starts from what served at ``at_ms``), or when the deployment already
        serves the environment; NotFound for an unknown environment or deployment; InvalidValue for a
        ``percent`` outside 0..100 or below 100 with ``rolling=False`` (a partial share needs a rolling
        promotion).
        """
        self._check_requested_share(percent, rolling)
        at = self._at(at_ms)
        with self._write() as conn:
            env = self._must_env(conn, model_id, env_name)
            if self._deployment_of(conn, model_id, deployment_id) is None:
                raise NotFound(f"model {model_id!r} has no deployment {deployment_id!r}")
            info = self._env_info(conn, env)
            is_rolling, start = _starting_share(env.promotion_settings, percent, rolling)
            self._check_percent(start)
            self._check_can_start(conn, info, deployment_id, at, supersede)
            status = status_for(start)
            pid = self._insert_promotion(
                conn, env.id, deployment_id, info.current_deployment_id, at, is_rolling, start
            )
            promotion = self._promotion_by_id(conn, pid)
            both = self._promotion_details(conn, promotion)
            share = {"environment": env_name, "rolling": is_rolling, "percent": start, "status": status}
            details = _promoted_details(both, share)
            self._event(
                conn,
                model_id,
                "PROMOTED",
                at,
                deployment_id=deployment_id,
                environment=env_name,
                details=details,
            )
            return promotion

    def _insert_promotion(
        self,
        conn: Connection,
        env_id: int,
        deployment_id: str,
        previous: str | None,
        at: int,
        rolling: bool,
        start: int,
    ) -> int:
        """Insert a promotion row starting at ``start`` percent (ended at once at 100) and its START step;
        returns its id."""
        values = dict(
            environment_id=env_id,
            deployment_id=deployment_id,
            started_at_ms=at,
            previous_deployment_id=previous,
            rolling=rolling,
            status=status_for(start),
            percent_traffic_to_new_version=start,
            ended_at_ms=at if start == 100 else None,
        )
        pid = int(conn.execute(insert(t.promotions).values(**values)).inserted_primary_key[0])  # type: ignore[index]
        self._step(conn, pid, at, "START", start)
        return pid

    @classmethod
    def _check_requested_share(cls, percent: int | None, rolling: bool | None) -> None:
        """InvalidValue for a ``percent`` outside 0..100, or below 100 with ``rolling=False``."""
        if percent is None:
            return
        cls._check_percent(percent)
        if rolling is False and percent < 100:
            raise InvalidValue(
                f"percent {percent} needs a rolling promotion: send rolling true (or leave rolling "
                "out), or percent 100 (or no percent) for an instant promotion"
            )

    @staticmethod
    def _check_percent(percent: int) -> None:
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise InvalidValue(f"percent must be an integer from 0 to 100, not {percent!r}")

    def _check_can_start(
        self, conn: Connection, info: EnvironmentInfo, dep: str, at: int, supersede: bool
    ) -> None:
        running = info.in_progress_promotion
        if running is not None and not supersede:
            raise Conflict(
                f"environment {info.name!r} already has a promotion of {running.deployment_id!r} in "
                "progress; cancel_promotion or force_roll_forward_promotion first"
            )
        if running is not None:
            self._finish(conn, running.id, at, "CANCELED", running.percent_traffic_to_new_version)
        elif info.current_deployment_id == dep:
            raise Conflict(f"deployment {dep!r} already serves environment {info.name!r}")

    @staticmethod
    def _deployment_of(conn: Connection, model_id: str, deployment_id: str) -> Row | None:
        d = t.deployments
        return conn.execute(select(d.c.id).where(d.c.id == deployment_id, d.c.model_id == model_id)).first()

    @staticmethod
    def _step(conn: Connection, promotion_id: int, at: int, action: str, percent: int) -> None:
        conn.execute(
            insert(t.promotion_steps).values(
                promotion_id=promotion_id, at_ms=at, action=action, percent=percent
            )
        )

    @staticmethod
    def _finish(conn: Connection, promotion_id: int, at: int, status: str, percent: int) -> None:
        conn.execute(
            update(t.promotions)
            .where(t.promotions.c.id == promotion_id)
            .values(status=status, ended_at_ms=at, percent_traffic_to_new_version=percent)
        )

    @staticmethod
    def _promotion_by_id(conn: Connection, promotion_id: int) -> PromotionInfo:
        return _promotion(conn.execute(select(t.promotions).where(t.promotions.c.id == promotion_id)).one())

    def promotions(self, model_id: str, env_name: str) -> list[PromotionInfo]:
        """Every promotion of the environment, oldest first."""
        with self.engine.connect() as conn:
            env = self._must_env(conn, model_id, env_name)
            p = t.promotions
            rows = conn.execute(select(p).where(p.c.environment_id == env.id).order_by(p.c.id))
            return [_promotion(r) for r in rows]

    def promotion_steps(self, promotion_id: int) -> list[tuple[int, str, int]]:
        """``(at_ms, action, percent)`` history of a promotion, oldest first."""
        s = t.promotion_steps
        with self.engine.connect() as conn:
            rows = conn.execute(select(s).where(s.c.promotion_id == promotion_id).order_by(s.c.at_ms, s.c.id))
            return [(r.at_ms, r.action, r.percent) for r in rows]


def _starting_share(
    promotion_settings: dict[str, Any], percent: int | None, rolling: bool | None
) -> tuple[bool, int]:
    """``(rolling, starting percent)`` of a new promotion: rolling when asked, when the environment's
    ``rolling_deploy`` setting says so, or when ``percent`` < 100; a rolling one starts at ``percent``
    (default 0), an instant one at 100."""
    is_rolling = rolling if rolling is not None else bool(promotion_settings.get("rolling_deploy"))
    is_rolling = is_rolling or (percent is not None and percent < 100)
    return is_rolling, ((percent if percent is not None else 0) if is_rolling else 100)


def _promoted_details(both: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
    """The PROMOTED event's details: the promotion's two deployments (``both``), the ``share`` fields
    (environment, rolling, percent, status), then ``old`` and ``new`` (deployment id and name of each)."""
    return {
        **both,
        **share,
        "old": {
            "deployment_id": both["previous_deployment_id"],
            "deployment_name": both["previous_deployment_name"],
        },
        "new": {"deployment_id": both["deployment_id"], "deployment_name": both["deployment_name"]},
    }
