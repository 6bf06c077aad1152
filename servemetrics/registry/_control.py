"""Control of a running promotion (percent steps, pause, resume, cancel, roll forward) and the timeline."""

from __future__ import annotations

from sqlalchemy import select

from servemetrics.registry import tables as t
from servemetrics.registry import timeline as tl
from servemetrics.registry._environments import EnvironmentsMixin, status_for
from servemetrics.registry.records import Conflict, PromotionInfo

# action -> (statuses it may start from, new status or None = keep / from percent, percent or None = keep)
_CONTROLS: dict[str, tuple[frozenset[str], str | None, int | None]] = {
    "PAUSE": (frozenset({"RELEASING", "RAMPING_UP"}), "PAUSED", None),
    "RESUME": (frozenset({"PAUSED"}), None, None),
    "CANCEL": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "CANCELED", 0),
    "FORCE_CANCEL": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "CANCELED", 0),
    "ROLL_FORWARD": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "SUCCEEDED", 100),
}


class ControlMixin(EnvironmentsMixin):
    """Promotion control and ``serving_timeline``."""

    def _control(
        self, model_id: str, env_name: str, action: str, percent: int | None, at_ms: int | None
    ) -> PromotionInfo:
        at = self._at(at_ms)
        with self._write() as conn:
            env = self._must_env(conn, model_id, env_name)
            running = self._env_info(conn, env).in_progress_promotion
            if running is None:
                raise Conflict(f"environment {env_name!r} has no promotion in progress")
            allowed, status, forced = _CONTROLS.get(action, (frozenset(), None, None))
            if action != "STEP" and running.status not in allowed:
                raise Conflict(
                    f"cannot {action.lower().replace('_', ' ')} a promotion that is {running.status}"
                )
            new_percent = percent if percent is not None else forced
            new_percent = running.percent_traffic_to_new_version if new_percent is None else new_percent
            if status is None:
                keep_paused = action == "STEP" and running.status == "PAUSED" and new_percent < 100
                status = "PAUSED" if keep_paused else status_for(new_percent)
            ended = at if status in t.TERMINAL_PROMOTION_STATUSES else None
            conn.execute(
                t.promotions.update()
                .where(t.promotions.c.id == running.id)
                .values(status=status, percent_traffic_to_new_version=new_percent, ended_at_ms=ended)
            )
            self._step(conn, running.id, at, action, new_percent)
            if action != "STEP":
                self._event(
                    conn,
                    model_id,
                    "PROMOTION_CONTROL",
                    at,
                    deployment_id=running.deployment_id,
                    environment=env_name,
                    details={
                        **self._promotion_details(conn, running),
                        "environment": env_name,
                        "action": action,
                        "percent": new_percent,
                        "status": status,
                        "old": {"status": running.status, "percent": running.percent_traffic_to_new_version},
                        "new": {"status": status, "percent": new_percent},
                    },
                )
            return self._promotion_by_id(conn, running.id)

    def set_promotion_percent(
        self, model_id: str, env_name: str, percent: int, at_ms: int | None = None
    ) -> PromotionInfo:
        """Record that the rolling promotion now sends ``percent`` % of traffic to the new deployment.

        100 completes it (SUCCEEDED; only the new deployment serves from ``at_ms``). Conflict when no
        promotion is in progress; InvalidValue outside 0..100.
        """
        self._check_percent(percent)
        return self._control(model_id, env_name, "STEP", percent, at_ms)

    def pause_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Pause the running promotion (PAUSED; serving unchanged); records PROMOTION_CONTROL."""
        return self._control(model_id, env_name, "PAUSE", None, at_ms)

    def resume_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Resume a paused promotion; records PROMOTION_CONTROL."""
        return self._control(model_id, env_name, "RESUME", None, at_ms)

    def cancel_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Cancel the running promotion (CANCELED; only the previous deployment serves from ``at_ms``)."""
        return self._control(model_id, env_name, "CANCEL", None, at_ms)

    def force_cancel_promotion(self, model_id: str, env_name: str, at_ms: int | None = None) -> PromotionInfo:
        """Cancel immediately and roll back, like ``cancel_promotion``; also works while rolling back."""
        return self._control(model_id, env_name, "FORCE_CANCEL", None, at_ms)

    def force_roll_forward_promotion(
        self, model_id: str, env_name: str, at_ms: int | None = None
    ) -> PromotionInfo:
        """Complete the running promotion now (SUCCEEDED at 100 %; only the new deployment serves)."""
        return self._control(model_id, env_name, "ROLL_FORWARD", None, at_ms)

    def _changes(self, model_id: str, env_name: str) -> list[tl.Change]:
        p, s, a = t.promotions, t.promotion_steps, t.environment_activations
        with self.engine.connect() as conn:
            env = self._env_row(conn, model_id, env_name)
            if env is None:
                return []
            steps = conn.execute(
                select(
                    s.c.id,
                    s.c.at_ms,
                    s.c.action,
                    s.c.percent,
                    p.c.id.label("pid"),
                    p.c.deployment_id,
                    p.c.rolling,
                )
                .join(p, s.c.promotion_id == p.c.id)
                .where(p.c.environment_id == env.id)
            ).all()
            flips = conn.execute(select(a).where(a.c.environment_id == env.id)).all()
        out = [
            tl.Change(r.at_ms, 2 * r.id, r.action, r.pid, r.deployment_id, r.percent, r.rolling)
            for r in steps
        ]
        out += [tl.Change(r.at_ms, 2 * r.id + 1, "ACTIVE" if r.active else "INACTIVE") for r in flips]
        return out

    def serving_timeline(
        self, model_id: str, env_name: str, start_ms: int, end_ms: int
    ) -> list[tuple[int, frozenset[str]]]:
        """Which deployments serve the environment over ``[start_ms, end_ms)``.

        A sorted list of ``(instant_ms, deployment ids serving from that instant on)``; the first entry is
        ``(start_ms, what served at start_ms)`` (``frozenset()`` if nothing did, or if the environment
        does not exist), then one entry per change of the serving set inside ``(start_ms, end_ms)``.
        Rules in ``registry.timeline``.
        """
        return tl.window(tl.states(self._changes(model_id, env_name)), start_ms, end_ms)
