"""The YAML config: defaults, errors that say what to write, and idempotent sync into the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servemetrics.config import ConfigError, apply_config, load_config, parse_config, parse_duration
from servemetrics.registry import Registry
from servemetrics.registry import tables as t

T0 = 1_772_366_400_000  # 2026-03-01T12:00:00Z in epoch ms

CONFIG = """
listen: 0.0.0.0:9000
data_dir: /var/lib/sm
scrape_interval: 30s
organizations:
  - name: acme
    api_keys:
      - {key: acme-manage-key-123, type: WORKSPACE_MANAGE_ALL}
      - {key: acme-export-key-456, type: workspace-export-metrics, model_ids: [m1]}
  - name: other
    api_keys: [{key: other-key-789, type: WORKSPACE_MANAGE_ALL}]
models:
  - id: m1
    name: llama
    organization: acme
    deployments:
      - id: d1
        name: v1
        instance_type: {gpu_type: H100, gpu_count: 1}
        replicas: [{id: r1, targets: ["http://127.0.0.1:8001/metrics"]}]
      - id: d2
        name: v2
        instance_type: {gpu_type: H100, gpu_count: 2}
        replicas:
          - {id: r1, targets: ["http://127.0.0.1:8002/metrics", "http://127.0.0.1:9400/metrics"]}
    environments:
      - name: production
        promotions:
          - {deployment: d1, at: "2026-03-01T12:00:00Z"}
          - {deployment: d2, at: "2026-03-01T13:00:00Z", percent: 25}
          - {deployment: d2, at: "2026-03-01T13:30:00Z", percent: 100}
"""


def _parse(text: str) -> object:
    return parse_config(yaml.safe_load(text))


def test_defaults() -> None:
    config = parse_config({})
    assert (config.listen, config.host, config.port) == ("127.0.0.1:8321", "127.0.0.1", 8321)
    assert config.data_dir == Path("data")
    assert (config.scrape_interval, config.scrape_timeout, config.retention) == (15.0, 10.0, 15 * 86400.0)
    assert config.registry_url == "sqlite:///data/registry.sqlite3"


def test_load_full_file(tmp_path: Path) -> None:
    path = tmp_path / "sm.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert (config.host, config.port, config.scrape_interval) == ("0.0.0.0", 9000, 30.0)
    assert config.registry_url == "sqlite:////var/lib/sm/registry.sqlite3"
    assert config.organizations[0].api_keys[1].type == "WORKSPACE_EXPORT_METRICS"
    assert "acme-manage-key-123" not in repr(config)
    promotions = config.models[0].environments[0].promotions
    assert [(p.deployment, p.at, p.percent) for p in promotions] == [
        ("d1", T0, 100),
        ("d2", T0 + 3_600_000, 25),
        ("d2", T0 + 5_400_000, 100),
    ]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(15, 15.0), ("15s", 15.0), ("500ms", 0.5), ("1m", 60.0), ("2h", 7200.0), ("15d", 1296000.0)],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scrape_intervall: 15s", "unknown key `scrape_intervall`: did you mean `scrape_interval`?"),
        (
            "scrape_interval: soon",
            "`scrape_interval`: 'soon' is not a duration; write a number of seconds or e.g. 15s",
        ),
        ("listen: 8321", "`listen`: '8321' is not host:port; write e.g. 127.0.0.1:8321"),
        (
            "scrape_interval: 5s\nscrape_timeout: 10s",
            "scrape_timeout (10s) must not exceed scrape_interval (5s)",
        ),
        (
            "organizations: [{name: a, api_keys: [{key: k, type: ADMIN}]}]",
            "`organizations[0].api_keys[0]`: unknown API key type 'ADMIN'; use one of PERSONAL",
        ),
        (
            "organizations: [{name: a, api_keys: [{type: PERSONAL}]}]",
            "missing key `organizations[0].api_keys[0].key`",
        ),
        (
            "models: [{id: m, organization: nobody}]",
            "names organization 'nobody', which is not under organizations",
        ),
        (
            "organizations: [{name: a}]\nmodels: [{id: m, organization: a, deployments: [{id: d, replicas: "
            "[{id: r, targets: [localhost:8000]}]}]}]",
            "'localhost:8000' is not a URL; write e.g. http://",
        ),
        (
            "organizations: [{name: a}]\nmodels: [{id: m, organization: a, environments: [{name: p, "
            "promotions: "
            "[{deployment: zz, at: '2026-03-01T12:00:00Z'}]}]}]",
            "promotes unknown deployment 'zz'",
        ),
        (
            "organizations: [{name: a}]\nmodels: [{id: m, organization: a, deployments: [{id: d}], "
            "environments: "
            "[{name: p, promotions: [{deployment: d, at: '2026-03-01T12:00:00'}]}]}]",
            "has no time zone; write e.g.",
        ),
        (
            "organizations: [{name: a}]\nmodels: [{id: m, organization: a, deployments: [{id: d}], "
            "environments: "
            "[{name: p, promotions: [{deployment: d, at: '2026-03-01T12:00:00Z', percent: 0}]}]}]",
            "`models[0].environments[0].promotions[0].percent`: Input should be greater than or equal to 1",
        ),
        ("organizations: [{name: a}, {name: a}]", "duplicate organization name a"),
        ("- just a list", "the top level must be a mapping"),
    ],
)
def test_errors_name_the_key_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(text)
    assert message in str(err.value)


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file .*nope.yaml"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("listen: [unclosed")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(bad)


def _counts(registry: Registry) -> dict[str, int]:
    with registry.engine.connect() as conn:
        return {table.name: len(conn.execute(table.select()).all()) for table in t.METADATA.sorted_tables}


def test_apply_is_idempotent_and_builds_the_timeline(registry: Registry) -> None:
    config = _parse(CONFIG)
    apply_config(config, registry)  # type: ignore[arg-type]
    first = _counts(registry)
    apply_config(config, registry)  # type: ignore[arg-type]
    assert _counts(registry) == first
    assert first["api_keys"] == 3 and first["targets"] == 3 and first["promotions"] == 2
    assert registry.serving_timeline("m1", "production", T0 - 1, T0 + 7_200_000) == [
        (T0 - 1, frozenset()),
        (T0, frozenset({"d1"})),
        (T0 + 3_600_000, frozenset({"d1", "d2"})),
        (T0 + 5_400_000, frozenset({"d2"})),
    ]
    key = registry.authenticate("acme-export-key-456")
    assert key is not None and key.model_ids == frozenset({"m1"}) and key.organization_name == "acme"
    d2 = registry.deployment("m1", "d2")
    assert d2 is not None and (d2.instance_type_name, d2.name) == ("2xH100", "v2")
    deployed = [(e.at_ms, e.deployment_id) for e in registry.list_events("m1", 0, 10**15, ["DEPLOYED"])]
    assert deployed == [(T0, "d1"), (T0 + 3_600_000, "d2")]  # dated by the file's first promotion of each
    with registry.engine.connect() as conn:
        stored = [str(v) for r in conn.execute(t.api_keys.select()) for v in r]
    assert not any("acme-manage-key-123" in v for v in stored)


def test_reapply_appends_promotions_changes_instance_type_and_drops_removed_keys(registry: Registry) -> None:
    apply_config(_parse(CONFIG), registry)  # type: ignore[arg-type]
    changed = CONFIG.replace("gpu_type: H100, gpu_count: 1", "gpu_type: A100, gpu_count: 1").replace(
        "      - {key: acme-export-key-456, type: workspace-export-metrics, model_ids: [m1]}\n", ""
    )
    changed += '          - {deployment: d1, at: "2026-03-01T15:00:00Z"}\n'
    apply_config(_parse(changed), registry)  # type: ignore[arg-type]
    assert registry.serving_timeline("m1", "production", T0 + 6_000_000, T0 + 20_000_000) == [
        (T0 + 6_000_000, frozenset({"d2"})),
        (T0 + 10_800_000, frozenset({"d1"})),
    ]
    assert registry.authenticate("acme-export-key-456") is None
    assert registry.authenticate("acme-manage-key-123") is not None
    assert [e.kind for e in registry.list_events("m1", 0, 10**15, ["INSTANCE_TYPE_CHANGED"])] == [
        "INSTANCE_TYPE_CHANGED"
    ]
    older = changed + '          - {deployment: d2, at: "2026-03-01T14:00:00Z"}\n'
    with pytest.raises(ConfigError, match="older than the latest recorded change"):
        apply_config(_parse(older), registry)  # type: ignore[arg-type]
