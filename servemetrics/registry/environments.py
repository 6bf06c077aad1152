"""The environments part of the registry: environments and their activation history, promotions
(instant and rolling) and their control, and the serving timeline computed from that history
(rules in ``registry.timeline``; settings checks in ``registry.environment_settings``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select, update

from servemetrics.registry import promotions as pr
from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry import timeline as tl
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.environment_settings import (
    DEFAULT_PROMOTION_SETTINGS,
    merge_autoscaling_settings,
    merge_promotion_settings,
)
from servemetrics.registry.events import environment_context
from servemetrics.registry.records import Conflict, EnvironmentInfo, NotFound, PromotionInfo


class Environments:
    """Environments, activation, promotions and their control, and ``serving_timeline``, over a
    ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    def _environment_event(
        self, conn: Connection, model_id: str, kind: str, at: int, env_name: str, details: dict[str, Any]
    ) -> None:
        """Record ``kind`` about environment ``env_name`` with ``details`` plus ``environment`` and the
        deployment it points at (``deployment_id``, ``deployment_name``; docs/dashboard-api.md "Events")."""
        self._core.event(
            conn,
            model_id,
            kind,
            at,
            environment=env_name,
            details={**environment_context(conn, model_id, env_name), **details},
        )

    def environment(self, model_id: str, env_name: str) -> EnvironmentInfo | None:
        """Environment ``env_name`` of ``model_id``; None if missing (or the model is another's)."""
        with self._core.read() as conn:
            row = rows.env_row(conn, model_id, env_name)
            return rows.env_info(conn, row) if row else None

    def list_environments(self, model_id: str) -> list[EnvironmentInfo]:
        """Environments of ``model_id`` by name."""
        e = t.environments
        with self._core.read() as conn:
            found = conn.execute(select(e).where(e.c.model_id == model_id).order_by(e.c.name)).all()
            return [rows.env_info(conn, r) for r in found]

    def create_environment(
        self,
        model_id: str,
        name: str,
        *,
        promotion_settings: dict[str, Any] | None = None,
        autoscaling_settings: dict[str, Any] | None = None,
        at_ms: int | None = None,
    ) -> EnvironmentInfo:
        """Create an environment; records ENVIRONMENT_UPDATED ``{action: created}``.

        Settings are merged over the defaults (``environment_settings``). Raises NotFound (no such
        model), Conflict (it exists) or InvalidValue (a bad setting).
        """
        settings = merge_promotion_settings(DEFAULT_PROMOTION_SETTINGS, promotion_settings)
        autoscaling_settings = merge_autoscaling_settings(None, autoscaling_settings)
        at = self._core.at(at_ms)
        with self._core.write(model_id) as conn:
            if rows.env_row(conn, model_id, name) is not None:
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
            return rows.env_info(conn, rows.must_env(conn, model_id, name))

    def update_environment(
        self,
        model_id: str,
        name: str,
        *,
        promotion_settings: dict[str, Any] | None = None,
        autoscaling_settings: dict[str, Any] | None = None,
        at_ms: int | None = None,
    ) -> EnvironmentInfo:
        """Change settings; record ENVIRONMENT_UPDATED ``{action: updated, old, new}`` on a change.

        Raises NotFound (no such environment) or InvalidValue (a bad setting).
        """
        with self._core.write() as conn:
            row = rows.must_env(conn, model_id, name)
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
                at = self._core.at(at_ms)
                self._environment_event(conn, model_id, "ENVIRONMENT_UPDATED", at, name, details)
            return rows.env_info(conn, rows.must_env(conn, model_id, name))

    def _set_env_active(self, model_id: str, name: str, active: bool, at_ms: int | None) -> bool:
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            row = rows.must_env(conn, model_id, name)
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
        """Let the environment serve again; records ACTIVATED. False if it was active; NotFound if missing."""
        return self._set_env_active(model_id, name, True, at_ms)

    def deactivate_environment(self, model_id: str, name: str, at_ms: int | None = None) -> bool:
        """Stop the environment serving (its timeline is empty from ``at_ms``); records DEACTIVATED.
        False if it was inactive; NotFound if missing."""
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
        pr.check_requested_share(percent, rolling)
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            env = rows.must_env(conn, model_id, env_name)
            if rows.deployment_of(conn, model_id, deployment_id) is None:
                raise NotFound(f"model {model_id!r} has no deployment {deployment_id!r}")
            info = rows.env_info(conn, env)
            is_rolling, start = pr.starting_share(env.promotion_settings, percent, rolling)
            pr.check_percent(start)
            self._check_can_start(conn, info, deployment_id, at, supersede)
            status = pr.status_for(start)
            pid = pr.insert_promotion(
                conn, env.id, deployment_id, info.current_deployment_id, at, is_rolling, start
            )
            promotion = rows.promotion_by_id(conn, pid)
            both = pr.promotion_details(conn, promotion)
            share = {"environment": env_name, "rolling": is_rolling, "percent": start, "status": status}
            details = pr.promoted_details(both, share)
            self._core.event(
                conn,
                model_id,
                "PROMOTED",
                at,
                deployment_id=deployment_id,
                environment=env_name,
                details=details,
            )
            return promotion

    @staticmethod
    def _check_can_start(conn: Connection, info: EnvironmentInfo, dep: str, at: int, supersede: bool) -> None:
        running = info.in_progress_promotion
        if running is not None and not supersede:
            raise Conflict(
                f"environment {info.name!r} already has a promotion of {running.deployment_id!r} in "
                "progress; cancel_promotion or force_roll_forward_promotion first"
            )
        if running is not None:
            pr.set_state(conn, running.id, "CANCELED", running.percent_traffic_to_new_version, at)
        elif info.current_deployment_id == dep:
            raise Conflict(f"deployment {dep!r} already serves environment {info.name!r}")

    def promotions(self, model_id: str, env_name: str) -> list[PromotionInfo]:
        """Every promotion of the environment, oldest first; NotFound if there is no such environment."""
        with self._core.read() as conn:
            env = rows.must_env(conn, model_id, env_name)
            p = t.promotions
            found = conn.execute(select(p).where(p.c.environment_id == env.id).order_by(p.c.id))
            return [rows.promotion_info(r) for r in found]

    def promotion_steps(self, promotion_id: int) -> list[tuple[int, str, int]]:
        """``(at_ms, action, percent)`` history of a promotion, oldest first."""
        s = t.promotion_steps
        with self._core.read() as conn:
            found = conn.execute(
                select(s).where(s.c.promotion_id == promotion_id).order_by(s.c.at_ms, s.c.id)
            )
            return [(r.at_ms, r.action, r.percent) for r in found]

    # -- control of a running promotion ---------------------------------------------------------

    def _control(
        self, model_id: str, env_name: str, action: str, percent: int | None, at_ms: int | None
    ) -> PromotionInfo:
        at = self._core.at(at_ms)
        with self._core.write() as conn:
            env = rows.must_env(conn, model_id, env_name)
            running = rows.env_info(conn, env).in_progress_promotion
            if running is None:
                raise Conflict(f"environment {env_name!r} has no promotion in progress")
            status, new_percent = pr.controlled(running, action, percent)
            ended = at if status in t.TERMINAL_PROMOTION_STATUSES else None
            pr.set_state(conn, running.id, status, new_percent, ended)
            pr.step(conn, running.id, at, action, new_percent)
            self._control_events(conn, model_id, env_name, at, running, action)
            return rows.promotion_by_id(conn, running.id)

    def _control_events(
        self, conn: Connection, model_id: str, env_name: str, at: int, before: PromotionInfo, action: str
    ) -> None:
        """Record PROMOTION_CONTROL for ``action`` on the promotion that was ``before`` (every step of
        the share too), then PROMOTED ``{status: SUCCEEDED, percent: 100}`` when it completed the promotion
        (a step to 100 or a roll-forward): the dashboard's Events then show each step and the end, and the
        new deployment is the environment's current one from ``at`` (metrics-dashboard.md "Events")."""
        after = rows.promotion_by_id(conn, before.id)
        both = pr.promotion_details(conn, before)
        status, percent = after.status, after.percent_traffic_to_new_version
        details = pr.control_details(both, env_name, action, before, status, percent)
        dep = before.deployment_id
        self._core.event(
            conn, model_id, "PROMOTION_CONTROL", at, deployment_id=dep, environment=env_name, details=details
        )
        if status == "SUCCEEDED":
            share = {"environment": env_name, "rolling": before.rolling, "percent": percent, "status": status}
            promoted = pr.promoted_details(both, share)
            self._core.event(
                conn, model_id, "PROMOTED", at, deployment_id=dep, environment=env_name, details=promoted
            )

    def set_promotion_percent(
        self, model_id: str, env_name: str, percent: int, at_ms: int | None = None
    ) -> PromotionInfo:
        """Record that the rolling promotion now sends ``percent`` % of traffic to the new deployment;
        records PROMOTION_CONTROL ``{action: STEP, percent, status}``.

        100 completes it (SUCCEEDED; only the new deployment serves from ``at_ms``, and PROMOTED
        ``{percent: 100, status: SUCCEEDED}`` follows the step's event). Conflict when no promotion is in
        progress; InvalidValue outside 0..100; NotFound for an unknown environment.
        """
        pr.check_percent(percent)
        return self._control(model_id, env_name, "STEP", percent, at_ms)

    def pause_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Pause the running promotion (PAUSED; serving unchanged); records PROMOTION_CONTROL.
        Conflict unless one is RELEASING or RAMPING_UP."""
        return self._control(model_id, env_name, "PAUSE", None, at_ms)

    def resume_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Resume a paused promotion; records PROMOTION_CONTROL. Conflict unless one is PAUSED."""
        return self._control(model_id, env_name, "RESUME", None, at_ms)

    def cancel_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Cancel the running promotion (CANCELED; only the previous deployment serves from ``at_ms``).
        Conflict when none is in progress."""
        return self._control(model_id, env_name, "CANCEL", None, at_ms)

    def force_cancel_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Cancel immediately and roll back, like ``cancel_promotion``; also works while rolling back."""
        return self._control(model_id, env_name, "FORCE_CANCEL", None, at_ms)

    def force_roll_forward_promotion(
        self, model_id: str, env_name: str, at_ms: int | None = None
    ) -> PromotionInfo:
        """Complete the running promotion now (SUCCEEDED at 100 %; only the new deployment serves);
        records PROMOTION_CONTROL then PROMOTED ``{percent: 100, status: SUCCEEDED}``. Conflict when none
        is in progress."""
        return self._control(model_id, env_name, "ROLL_FORWARD", None, at_ms)

    # -- the serving timeline ---------------------------------------------------------------------

    def serving_timeline(
        self, model_id: str, env_name: str, start_ms: int, end_ms: int
    ) -> list[tuple[int, frozenset[str]]]:
        """Which deployments serve the environment over ``[start_ms, end_ms)``.

        A sorted list of ``(instant_ms, deployment ids serving from that instant on)``; the first entry is
        ``(start_ms, what served at start_ms)`` (``frozenset()`` if nothing did, or if the environment
        does not exist), then one entry per change of the serving set inside ``(start_ms, end_ms)``.
        Rules in ``registry.timeline``.
        """
        with self._core.read() as conn:
            env = rows.env_row(conn, model_id, env_name)
            changes = _history(conn, env.id) if env is not None else []
        return tl.window(tl.states(changes), start_ms, end_ms)


def _history(conn: Connection, env_id: int) -> list[tl.Change]:
    """The environment's promotion steps and activation flips as ``timeline.Change`` rows (steps get even
    ``order`` numbers, flips odd ones, so both sort by ``(at_ms, order)``)."""
    p, s, a = t.promotions, t.promotion_steps, t.environment_activations
    steps = conn.execute(
        select(
            s.c.id, s.c.at_ms, s.c.action, s.c.percent, p.c.id.label("pid"), p.c.deployment_id, p.c.rolling
        )
        .join(p, s.c.promotion_id == p.c.id)
        .where(p.c.environment_id == env_id)
    ).all()
    flips = conn.execute(select(a).where(a.c.environment_id == env_id)).all()
    out = [
        tl.Change(r.at_ms, 2 * r.id, r.action, r.pid, r.deployment_id, r.percent, r.rolling) for r in steps
    ]
    out += [tl.Change(r.at_ms, 2 * r.id + 1, "ACTIVE" if r.active else "INACTIVE") for r in flips]
    return out
