"""The backoff of a FAILED replica's health checks and the config file's ``health`` section that sets it."""

from __future__ import annotations

import itertools

import pytest

from servemetrics.api.service import gateway_options_of
from servemetrics.config import ConfigError, parse_config
from servemetrics.gateway import GatewayOptions
from servemetrics.gateway.health import Backoff


def _first(backoff: Backoff, n: int) -> list[float]:
    return list(itertools.islice(backoff.delays(), n))


def test_the_default_schedule_doubles_from_1_s_to_60_s() -> None:
    # 1, 2, 4, ... 32, then 64 capped at 60, and 60 for ever: checks at 1, 3, 7, 15, 31, 63, 123, 183 s
    assert _first(Backoff(), 9) == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert list(itertools.accumulate(_first(Backoff(), 8))) == [1, 3, 7, 15, 31, 63, 123, 183]


def test_other_schedules_and_bad_ones() -> None:
    assert _first(Backoff(0.25, 1.0), 5) == [0.25, 0.5, 1.0, 1.0, 1.0]
    assert _first(Backoff(3.0, 3.0), 3) == [3.0, 3.0, 3.0]
    assert _first(Backoff(0.1, 0.3), 4) == [0.1, 0.2, 0.3, 0.3]
    for first, most in ((0.0, 1.0), (2.0, 1.0), (-1.0, 5.0)):
        with pytest.raises(ValueError, match="0 < first_s <= max_s"):
            Backoff(first, most)


def test_the_health_section_sets_the_gateway_options() -> None:
    assert gateway_options_of(parse_config({})) == GatewayOptions()
    health = {"interval": "250ms", "timeout": "0.2s", "failures": 3, "recovery_backoff": "100ms"}
    options = gateway_options_of(parse_config({"health": {**health, "recovery_backoff_max": "2s"}}))
    assert (
        options.health_interval_s,
        options.health_timeout_s,
        options.health_failures,
        options.recovery_backoff_s,
        options.recovery_backoff_max_s,
    ) == (0.25, 0.2, 3, 0.1, 2.0)
    assert options.queue_limit == GatewayOptions().queue_limit  # the rest keep their defaults


@pytest.mark.parametrize(
    ("health", "words"),
    [
        ({"recovery_backoff": "2m"}, "recovery_backoff (120s) must not exceed recovery_backoff_max (60s)"),
        ({"failures": 0}, "health.failures"),
        ({"interval": "10ms"}, "must be at least 50ms"),
        ({"backoff": "1s"}, "health.backoff"),
    ],
)
def test_health_mistakes_say_what_to_fix(health: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"health": health})
    assert words in str(err.value)
