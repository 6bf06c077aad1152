"""The limits of issue 12 part 4 in the config file: their defaults (the ones docs/configuration.md and
docs/security.md list), units, bounds and one-line errors."""

from __future__ import annotations

import pytest

from servemetrics.config import ConfigError, parse_config
from servemetrics.ingest.scrape_limits import ScrapeLimits


def test_defaults() -> None:
    config = parse_config({})
    assert config.scrape_limits() == {
        "body_size_limit": 64 << 20,
        "sample_limit": 1_000_000,
        "label_limit": 64,
        "label_name_length_limit": 1024,
        "label_value_length_limit": 16384,
        "custom_series_limit": 1000,
    }
    assert ScrapeLimits(**config.scrape_limits()) == ScrapeLimits()
    limits = config.limits
    assert (limits.remote_write_samples, limits.import_samples, limits.series_per_organization) == (
        1_000_000,
        100_000_000,
        1_000_000,
    )


def test_set_with_units_and_zero_turns_counts_off() -> None:
    config = parse_config(
        {
            "body_size_limit": "1MiB",
            "sample_limit": 0,
            "label_limit": 10,
            "limits": {"series_per_organization": 0},
        }
    )
    assert config.scrape_limits()["body_size_limit"] == 1 << 20
    assert config.scrape_limits()["sample_limit"] == 0
    assert config.limits.series_per_organization == 0


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"body_size_limit": "1KB"}, "`body_size_limit`: must be from 1024 to 17179869184 bytes (got 1000)"),
        ({"sample_limit": -1}, "`sample_limit`"),
        ({"limits": {"remote_write_samples": 0}}, "`limits.remote_write_samples`"),
        ({"sampel_limit": 5}, "did you mean `sample_limit`"),
    ],
)
def test_mistakes_are_one_line_errors(data: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert words in str(exc.value) and "\n" not in str(exc.value)
