"""The rules and rows of promotions, for the environments part: the starting share of a new promotion,
the status a share gives, what each control action may start from and leads to, the promotion and step
rows, and the details of PROMOTED and PROMOTION_CONTROL events. Percents are integers 0..100; times are
epoch ms.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, update

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry.records import Conflict, InvalidValue, PromotionInfo

# action -> (statuses it may start from, new status or None = keep / from percent, percent or None = keep)
_CONTROLS: dict[str, tuple[frozenset[str], str | None, int | None]] = {
    "PAUSE": (frozenset({"RELEASING", "RAMPING_UP"}), "PAUSED", None),
    "RESUME": (frozenset({"PAUSED"}), None, None),
    "CANCEL": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "CANCELED", 0),
    "FORCE_CANCEL": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "CANCELED", 0),
    "ROLL_FORWARD": (frozenset({"RELEASING", "RAMPING_UP", "PAUSED", "RAMPING_DOWN"}), "SUCCEEDED", 100),
}


def status_for(percent: int) -> str:
    """The status of a running promotion at ``percent``: RELEASING at 0, RAMPING_UP < 100, else SUCCEEDED."""
    return "RELEASING" if percent == 0 else "RAMPING_UP" if percent < 100 else "SUCCEEDED"


def check_percent(percent: int) -> None:
    """InvalidValue unless ``percent`` is an integer (not a bool) from 0 to 100."""
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise InvalidValue(f"percent must be an integer from 0 to 100, not {percent!r}")


def check_requested_share(percent: int | None, rolling: bool | None) -> None:
    """InvalidValue for a ``percent`` outside 0..100, or below 100 with ``rolling=False``."""
    if percent is None:
        return
    check_percent(percent)
    if rolling is False and percent < 100:
        raise InvalidValue(
            f"percent {percent} needs a rolling promotion: send rolling true (or leave rolling "
            "out), or percent 100 (or no percent) for an instant promotion"
        )


def starting_share(
    promotion_settings: dict[str, Any], percent: int | None, rolling: bool | None
) -> tuple[bool, int]:
    """``(rolling, starting percent)`` of a new promotion: rolling when asked, when the environment's
    ``rolling_deploy`` setting says so, or when ``percent`` < 100; a rolling one starts at ``percent``
    (default 0), an instant one at 100."""
    is_rolling = rolling if rolling is not None else bool(promotion_settings.get("rolling_deploy"))
    is_rolling = is_rolling or (percent is not None and percent < 100)
    return is_rolling, ((percent if percent is not None else 0) if is_rolling else 100)


def controlled(running: PromotionInfo, action: str, percent: int | None) -> tuple[str, int]:
    """``(new status, new percent)`` of the running promotion after ``action`` (STEP to ``percent``,
    PAUSE, RESUME, CANCEL, FORCE_CANCEL or ROLL_FORWARD). Conflict when the action cannot start from
    the promotion's status (a STEP always can; a step below 100 keeps a PAUSED promotion paused)."""
    allowed, status, forced = _CONTROLS.get(action, (frozenset(), None, None))
    if action != "STEP" and running.status not in allowed:
        raise Conflict(f"cannot {action.lower().replace('_', ' ')} a promotion that is {running.status}")
    new_percent = percent if percent is not None else forced
    new_percent = running.percent_traffic_to_new_version if new_percent is None else new_percent
    if status is None:
        keep_paused = action == "STEP" and running.status == "PAUSED" and new_percent < 100
        status = "PAUSED" if keep_paused else status_for(new_percent)
    return status, new_percent


def insert_promotion(
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
    step(conn, pid, at, "START", start)
    return pid


def step(conn: Connection, promotion_id: int, at: int, action: str, percent: int) -> None:
    """Append ``(at, action, percent)`` to the promotion's step history."""
    conn.execute(
        insert(t.promotion_steps).values(promotion_id=promotion_id, at_ms=at, action=action, percent=percent)
    )


def set_state(
    conn: Connection, promotion_id: int, status: str, percent: int, ended_at_ms: int | None
) -> None:
    """Set the promotion's status, percent and end (None: still running)."""
    conn.execute(
        update(t.promotions)
        .where(t.promotions.c.id == promotion_id)
        .values(status=status, percent_traffic_to_new_version=percent, ended_at_ms=ended_at_ms)
    )


def promotion_details(conn: Connection, promotion: PromotionInfo) -> dict[str, Any]:
    """Both deployments of a promotion: ``deployment_id`` / ``deployment_name`` (the promoted one)
    and ``previous_deployment_id`` / ``previous_deployment_name`` (None when the environment had none)."""
    return {
        "deployment_id": promotion.deployment_id,
        "deployment_name": rows.deployment_name(conn, promotion.deployment_id),
        "previous_deployment_id": promotion.previous_deployment_id,
        "previous_deployment_name": rows.deployment_name(conn, promotion.previous_deployment_id),
    }


def promoted_details(both: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
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


def control_details(
    both: dict[str, Any], environment: str, action: str, before: PromotionInfo, status: str, percent: int
) -> dict[str, Any]:
    """The PROMOTION_CONTROL event's details: the promotion's two deployments (``both``), ``environment``,
    ``action`` (STEP for a change of share, PAUSE, RESUME, CANCEL, FORCE_CANCEL, ROLL_FORWARD), the new
    ``percent`` and ``status``, then ``old`` and ``new`` ``{status, percent}`` (``before`` is the
    promotion as it was; metrics-dashboard.md "Events": "Promotion control action")."""
    return {
        **both,
        "environment": environment,
        "action": action,
        "percent": percent,
        "status": status,
        "old": {"status": before.status, "percent": before.percent_traffic_to_new_version},
        "new": {"status": status, "percent": percent},
    }
