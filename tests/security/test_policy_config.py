"""The ``network`` and ``limits`` keys fail like every other key: one line naming the key and what to
write."""

from __future__ import annotations

import pytest

from servemetrics.config import ConfigError, parse_config


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"network": {"target_allow": []}},
            "config: unknown key `network.target_allow`: did you mean `targets_allow`? allowed keys here "
            "are targets_allow, webhooks_allow",
        ),
        (
            {"network": {"webhooks_allow": ["10.0.0.0/8", "not a host!"]}},
            "config: `network.webhooks_allow[1]`: 'not a host!' is neither a network nor a host name; write "
            "e.g. 10.0.0.0/8, 127.0.0.1, fd00::/8, metrics.internal or *.svc.cluster.local",
        ),
        (
            {"limits": {"max_body_bytes": "1 parsec"}},
            "config: `limits.max_body_bytes`: '1 parsec' is not a size; write a whole number of bytes or "
            "e.g. 1MiB, 32MiB, 1GiB",
        ),
        (
            {"limits": {"inference_body_bytes": 10}},
            "config: `limits.inference_body_bytes`: must be from 1024 to 17179869184 bytes (got 10)",
        ),
    ],
)
def test_mistakes_are_one_line_naming_the_key(data, error):
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert str(exc.value) == error


def test_sizes_and_entries_as_written():
    config = parse_config(
        {
            "network": {"targets_allow": [" 127.0.0.1 ", "*.svc.cluster.local"]},
            "limits": {"max_body_bytes": "2MiB"},
        }
    )
    assert config.network.targets_allow == ["127.0.0.1", "*.svc.cluster.local"]
    assert (config.limits.max_body_bytes, config.limits.import_body_bytes) == (2 << 20, 1 << 30)
