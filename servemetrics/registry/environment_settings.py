"""Settings of an environment: its promotion settings (``PromotionSettingsV1``, platform-facts §4) and
its autoscaling settings, with their defaults and checks. Pure functions; errors are InvalidValue."""

from __future__ import annotations

from typing import Any

from servemetrics.registry.deployments import check_autoscaling
from servemetrics.registry.records import MAX_SETTING, InvalidValue

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
