"""The YAML config: defaults, errors that say what to write, and idempotent sync into the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servemetrics.config import (
    ConfigError,
    apply_config,
    load_config,
    open_registry,
    parse_config,
    parse_duration,
)
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


def test_listen_is_parsed_once_into_host_and_port() -> None:
    config = parse_config({"listen": "[::]:8080"})
    assert (config.listen, config.host, config.port) == ("[::]:8080", "[::]", 8080)
    assert config.model_dump(mode="json")["listen"] == "[::]:8080"


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
    ("text", "timeout"),
    [("scrape_interval: 5s", 5.0), ("scrape_interval: 30s", 10.0), ("{}", 10.0), ("scrape_timeout: 3s", 3.0)],
)
def test_the_scrape_timeout_defaults_to_10s_or_a_shorter_interval(text: str, timeout: float) -> None:
    """Prometheus' rule: without its own timeout a job's is the global 10 s, or its interval if shorter."""
    assert parse_config(yaml.safe_load(text)).scrape_timeout == timeout


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
            "target 'localhost:8000' is not an http:// or https:// URL; write e.g. "
            "http://10.0.0.5:8080/metrics",
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
    assert registry.environments.serving_timeline("m1", "production", T0 - 1, T0 + 7_200_000) == [
        (T0 - 1, frozenset()),
        (T0, frozenset({"d1"})),
        (T0 + 3_600_000, frozenset({"d1", "d2"})),
        (T0 + 5_400_000, frozenset({"d2"})),
    ]
    key = registry.tenancy.authenticate("acme-export-key-456")
    assert key is not None and key.model_ids == frozenset({"m1"}) and key.organization_name == "acme"
    d2 = registry.deployments.deployment("m1", "d2")
    assert d2 is not None and (d2.instance_type_name, d2.name) == ("2xH100", "v2")
    deployed = [
        (e.at_ms, e.deployment_id) for e in registry.events.list_events("m1", 0, 10**15, ["DEPLOYED"])
    ]
    assert deployed == [(T0, "d1"), (T0 + 3_600_000, "d2")]  # dated by the file's first promotion of each
    promotion_events = [
        (e.at_ms, e.kind, e.deployment_id, e.details["percent"], e.details["status"])
        for e in registry.events.list_events("m1", 0, 10**15, ["PROMOTED", "PROMOTION_CONTROL"])
    ]
    assert promotion_events == [  # once each, though applied twice; the 100 % step ends the promotion
        (T0, "PROMOTED", "d1", 100, "SUCCEEDED"),
        (T0 + 3_600_000, "PROMOTED", "d2", 25, "RAMPING_UP"),
        (T0 + 5_400_000, "PROMOTION_CONTROL", "d2", 100, "SUCCEEDED"),
        (T0 + 5_400_000, "PROMOTED", "d2", 100, "SUCCEEDED"),
    ]
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
    assert registry.environments.serving_timeline("m1", "production", T0 + 6_000_000, T0 + 20_000_000) == [
        (T0 + 6_000_000, frozenset({"d2"})),
        (T0 + 10_800_000, frozenset({"d1"})),
    ]
    assert registry.tenancy.authenticate("acme-export-key-456") is None
    assert registry.tenancy.authenticate("acme-manage-key-123") is not None
    assert [e.kind for e in registry.events.list_events("m1", 0, 10**15, ["INSTANCE_TYPE_CHANGED"])] == [
        "INSTANCE_TYPE_CHANGED"
    ]
    older = changed + '          - {deployment: d2, at: "2026-03-01T14:00:00Z"}\n'
    with pytest.raises(ConfigError, match="older than the latest recorded change"):
        apply_config(_parse(older), registry)  # type: ignore[arg-type]


ORG = "organizations: [{name: a}]\n"
RULE = "use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _model(body: str) -> str:
    return ORG + "models: [{id: m, organization: a, " + body + "}]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "organizations:\n  - {name: acme, api_keys: [{key: same, type: WORKSPACE_MANAGE_ALL}]}\n"
            "  - {name: other, api_keys: [{key: same, type: WORKSPACE_MANAGE_ALL}]}",
            "config: the same API key is listed at organizations[0].api_keys[0] (organization 'acme') and at "
            "organizations[1].api_keys[0] (organization 'other'); a key belongs to one organization and is "
            "listed once: give each entry its own key",
        ),
        (
            "organizations: [{name: acme, api_keys: [{key: k, type: PERSONAL}, {key: k, type: PERSONAL}]}]",
            "config: the same API key is listed at organizations[0].api_keys[0] (organization 'acme') and at "
            "organizations[0].api_keys[1] (organization 'acme'); a key belongs to one organization and is "
            "listed once: give each entry its own key",
        ),
        (
            "organizations: [{name: a, api_keys: [{key: k, type: WORKSPACE_EXPORT_METRICS, model_ids: "
            "[nope]}]}]",
            "config: organizations[0].api_keys[0] (organization 'a') is scoped to model_ids nope, which are "
            "not under models; declare them there or use some of: (none)",
        ),
        (
            _model("deployments: [{id: production}, {id: d1}]"),
            "config: `models[0].deployments[0].id`: deployment id 'production' is reserved: `production` and "
            "`development` name the deployment that environment serves; choose another id",
        ),
        (
            _model("deployments: [{id: development}]"),
            "config: `models[0].deployments[0].id`: deployment id 'development' is reserved: "
            "`production` and "
            "`development` name the deployment that environment serves; choose another id",
        ),
        (
            ORG + "models: [{id: 'a/b', organization: a}]",
            f"config: `models[0].id`: 'a/b' is not a valid model id: {RULE}",
        ),
        (
            _model("deployments: [{id: 'x/y'}]"),
            f"config: `models[0].deployments[0].id`: 'x/y' is not a valid deployment id: {RULE}",
        ),
        (
            _model("deployments: [{id: d, replicas: [{id: 'r 1'}]}]"),
            f"config: `models[0].deployments[0].replicas[0].id`: 'r 1' is not a valid replica id: {RULE}",
        ),
        (
            _model("environments: [{name: 'production '}]"),
            "config: `models[0].environments[0].name`: 'production ' is not a valid environment name: "
            f"{RULE}",
        ),
        (
            _model(
                "deployments: [{id: d, replicas: [{id: r1, targets: [http://a/m]}, {id: r1, targets: "
                "[http://b/m]}]}]"
            ),
            "config: `models[0].deployments[0]`: duplicate replica id r1; each must be unique",
        ),
        (
            _model(
                "deployments: [{id: d1}, {id: d2}], environments: [{name: p, promotions: ["
                "{deployment: d1, at: '2026-01-01T00:00:00Z'}, {deployment: d2, at: "
                "'2026-01-01T00:00:00Z'}]}]"
            ),
            "config: `models[0].environments[0]`: environment 'p' has two promotions at "
            "2026-01-01T00:00:00Z; "
            "give each promotion its own `at`",
        ),
        (
            _model(
                "deployments: [{id: d1}, {id: d2}], environments: [{name: p, promotions: ["
                "{deployment: d1, at: '2026-01-01T00:00:00.250Z'}, {deployment: d2, at: "
                "'2026-01-01T00:00:00.250Z'}]}]"
            ),
            "config: `models[0].environments[0]`: environment 'p' has two promotions at "
            "2026-01-01T00:00:00.250Z; "
            "give each promotion its own `at`",
        ),
        (
            _model("deployments: [{id: d, replicas: [{id: r, targets: ['http://']}]}]"),
            "config: `models[0].deployments[0].replicas[0].targets[0]`: target 'http://' has no host; "
            "write e.g. "
            "http://10.0.0.5:8080/metrics",
        ),
        (
            _model("deployments: [{id: d, replicas: [{id: r, targets: ['http://exa mple/metrics']}]}]"),
            "config: `models[0].deployments[0].replicas[0].targets[0]`: target 'http://exa "
            "mple/metrics' contains "
            "whitespace; write e.g. http://10.0.0.5:8080/metrics",
        ),
        ("retention: .inf", "config: `retention`: inf is not a finite duration; write e.g. 15s, 1m, 2h, 15d"),
        (
            "scrape_interval: .nan",
            "config: `scrape_interval`: nan is not a finite duration; write e.g. 15s, 1m, 2h, 15d",
        ),
        (
            "scrape_interval: 500ms\nscrape_timeout: 100ms",
            "config: `scrape_interval`: must be at least 1s (got 0.5s)",
        ),
        ("retention: 30m", "config: `retention`: must be at least 1h (got 1800s)"),
        (
            "registry_url: not a url",
            "config: `registry_url`: 'not a url' is not a SQLAlchemy URL; write "
            "sqlite:///path/registry.sqlite3 "
            "or postgresql://user:pass@host:5432/db",
        ),
        (
            "registry_url: 'postgresql+asyncpg://u@h/db'",
            "config: `registry_url`: 'postgresql+asyncpg' is not a supported driver; write postgresql+psycopg://…",
        ),
    ],
)
def test_config_mistakes_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(text)
    assert str(err.value) == message


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"listen: \xff\xfe\x00\x01")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path} is not a UTF-8 text file (byte 8 cannot be decoded); pass a YAML file"


def test_a_failing_apply_changes_nothing(registry: Registry) -> None:
    apply_config(_parse(CONFIG), registry)  # type: ignore[arg-type]
    before = _counts(registry)
    older = CONFIG.replace(
        "  - name: other\n", "      - {key: acme-new-key, type: PERSONAL}\n  - name: other\n"
    ).replace("name: v1\n", "name: renamed\n")
    older += '          - {deployment: d1, at: "2026-03-01T13:15:00Z"}\n'
    with pytest.raises(ConfigError) as err:
        apply_config(_parse(older), registry)  # type: ignore[arg-type]
    assert str(err.value) == (
        "models[m1].environments[production]: the promotion of 'd1' at 1772370900000 ms is older than the "
        "latest recorded change (1772371800000 ms); promotions can only be appended to the history"
    )
    assert _counts(registry) == before
    assert registry.tenancy.authenticate("acme-new-key") is None
    d1 = registry.deployments.deployment("m1", "d1")
    assert d1 is not None and d1.name == "v1"


def test_a_registry_refusal_is_a_config_error_and_changes_nothing(registry: Registry) -> None:
    registry.tenancy.ensure_organization("acme")
    registry.tenancy.ensure_model("elsewhere", "x", "acme")
    registry.deployments.create_deployment("elsewhere", "d2", "taken")
    before = _counts(registry)
    with pytest.raises(ConfigError) as err:
        apply_config(_parse(CONFIG), registry)  # type: ignore[arg-type]
    assert str(err.value) == (
        "cannot apply the config to the registry: deployment id 'd2' is taken; choose another id"
    )
    assert _counts(registry) == before


def test_open_registry_reports_a_bad_data_dir_and_an_unreachable_database(tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ConfigError) as err:
        open_registry(parse_config({"data_dir": str(afile)}))
    assert str(err.value) == f"data_dir {afile} exists and is not a directory; point data_dir at a directory"
    url = "postgresql+psycopg://nobody:secret@127.0.0.1:1/x"
    with pytest.raises(ConfigError) as err:
        open_registry(parse_config({"data_dir": str(tmp_path / "d"), "registry_url": url}))
    message = str(err.value)
    assert message.startswith("cannot open the registry at postgresql+psycopg://nobody:***@127.0.0.1:1/x (")
    assert message.endswith(
        "); check that PostgreSQL is running there and that the URL's host, port, user, password and "
        "database are right"
    )
    assert "secret" not in message
    registry = open_registry(parse_config({"data_dir": str(tmp_path / "new" / "dir")}))
    registry.close()
    assert (tmp_path / "new" / "dir").is_dir()


def test_relative_data_dir_is_relative_to_the_config_file(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.yaml").write_text("data_dir: store\n")
    (tmp_path / "conf" / "b.yaml").write_text("listen: 127.0.0.1:8321\n")
    (tmp_path / "conf" / "c.yaml").write_text(f"data_dir: {tmp_path / 'abs'}\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("conf/a.yaml").data_dir == Path("conf/store")
    assert load_config(tmp_path / "conf" / "b.yaml").data_dir == tmp_path / "conf" / "data"
    assert load_config("conf/c.yaml").data_dir == tmp_path / "abs"


@pytest.mark.parametrize("plain", ["postgresql://u:p@h:5432/db", "postgres://u:p@h:5432/db"])
def test_a_driverless_postgresql_url_means_psycopg(plain: str) -> None:
    # issue 6's interface writes `registry_url: postgresql://...`; psycopg is the driver we ship
    config = _parse(f"registry_url: '{plain}'")
    assert config.registry_url == "postgresql+psycopg://u:p@h:5432/db"  # type: ignore[attr-defined]


ENGINE = (
    "store: {kind: prometheus, flavor: victoriametrics, query_url: 'http://127.0.0.1:8428', "
    "remote_write_url: 'http://127.0.0.1:8428/api/v1/write'"
)
"""A ``kind: prometheus`` store mapping left open: the case appends its keys and ``}``."""
HEADER_FIX = "write the engine's token in printable ASCII, on one line"
PORT_RULE = "not a number from 1 to 65535"
TRAINER = ORG + "loops: [{id: t, organization: a, nodes: [{id: n0, role: leader}, {id: n1, "


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # durations have upper bounds (retention overflowed SQLite's integers, the interval the rules)
        (
            "retention: 10000000000000d",
            "config: `retention`: must be at most 3650d (10 years) (got 8.64e+17s)",
        ),
        ("scrape_interval: 10000000000000d", "config: `scrape_interval`: must be at most 1h (got 8.64e+17s)"),
        ("scrape_timeout: 2h", "config: `scrape_timeout`: must be at most 1h (got 7200s)"),
        # credentials and tenant headers are HTTP header values
        (
            ENGINE + ", bearer_token: ''}",
            f"config: `store.bearer_token`: the bearer_token is empty; {HEADER_FIX}",
        ),
        (
            ENGINE + ', bearer_token: "tok\\nen"}',
            "config: `store.bearer_token`: the bearer_token contains the character '\\n', which an HTTP "
            f"header cannot carry; {HEADER_FIX}",
        ),
        (
            ENGINE + ', bearer_token: "tok\\u0007"}',
            "config: `store.bearer_token`: the bearer_token contains the character '\\x07', which an HTTP "
            f"header cannot carry; {HEADER_FIX}",
        ),
        (
            ENGINE + ", basic_auth: {username: '', password: p}}",
            "config: `store.basic_auth.username`: the username is empty; write the engine's user name, e.g. "
            "username: sm",
        ),
        (
            ENGINE + ", basic_auth: {username: 'a:b', password: p}}",
            "config: `store.basic_auth.username`: the username contains ':', which basic auth cannot carry "
            "in a username; write the engine's user name, e.g. username: sm",
        ),
        (
            ENGINE + ', basic_auth: {username: sm, password: "pw\\r\\n"}}',
            "config: `store.basic_auth.password`: the password contains the character '\\r', which an HTTP "
            "header cannot carry; write the engine's password in printable ASCII, on one line",
        ),
        (
            ENGINE + ", tenant_header: {'X Scope': a}}",
            "config: `store`: tenant_header 'X Scope' is not an HTTP header name; use letters, digits and "
            "'-', e.g. X-Scope-OrgID: team-a",
        ),
        (
            ENGINE + ", tenant_header: {X-Scope-OrgID: ''}}",
            "config: `store`: the tenant_header X-Scope-OrgID value is empty; write the tenant in printable "
            "ASCII, e.g. X-Scope-OrgID: team-a",
        ),
        (
            ENGINE + ', tenant_header: {X-Scope-OrgID: "a\\tb\\u0001"}}',
            "config: `store`: the tenant_header X-Scope-OrgID value contains the character '\\x01', which an "
            "HTTP header cannot carry; write the tenant in printable ASCII, e.g. X-Scope-OrgID: team-a",
        ),
        # buffer_dir "" would put the segments in data_dir beside the registry
        (
            ENGINE + ", buffer_dir: ''}",
            "config: `store.buffer_dir`: must not be empty; omit it (the default is remote_write_buffer in "
            "data_dir) or name a directory",
        ),
        (
            "data_dir: /srv/sm\n" + ENGINE + ", buffer_dir: /srv/sm/}",
            "config: store.buffer_dir /srv/sm is data_dir itself; the buffer needs its own directory: omit "
            "buffer_dir (remote_write_buffer in data_dir) or name another one",
        ),
        # ports
        (
            "store: {kind: prometheus, flavor: prometheus, query_url: 'http://127.0.0.1:99999', "
            "remote_write_url: 'http://127.0.0.1:9090/api/v1/write'}",
            f"config: `store.query_url`: 'http://127.0.0.1:99999' has port 99999, {PORT_RULE}; write e.g. "
            "http://127.0.0.1:8428",
        ),
        (
            "store: {kind: prometheus, flavor: prometheus, query_url: 'http://127.0.0.1:9090', "
            "remote_write_url: 'http://127.0.0.1:0/api/v1/write'}",
            f"config: `store.remote_write_url`: 'http://127.0.0.1:0/api/v1/write' has port 0, {PORT_RULE}; "
            "write e.g. http://127.0.0.1:8428",
        ),
        (
            _model("deployments: [{id: d, replicas: [{id: r, targets: ['http://h.example:0/m']}]}]"),
            "config: `models[0].deployments[0].replicas[0].targets[0]`: target 'http://h.example:0/m' has "
            f"port 0, {PORT_RULE}; write e.g. http://10.0.0.5:8080/metrics",
        ),
        (
            "registry_url: 'postgresql://u:pw@h:70000/db'",
            f"config: `registry_url`: 'postgresql+psycopg://u:***@h:70000/db' has port 70000, {PORT_RULE}; "
            "write sqlite:///path/registry.sqlite3 or postgresql://user:pass@host:5432/db",
        ),
        # trainer nodes: one kind per URL, small distinct GPU ranks, the path named
        (
            TRAINER + "targets: [{url: 'http://127.0.0.1:9/m', kind: dcgm}, "
            "{url: 'http://127.0.0.1:9/m', kind: requests}]}]}]",
            "config: `loops[0].nodes[1].targets`: target http://127.0.0.1:9/m is listed 2 times (kinds dcgm, "
            "requests); list each URL once, with the one kind it serves",
        ),
        (
            TRAINER + "gpu_ranks: [0, 1, 1]}]}]",
            "config: `loops[0].nodes[1].gpu_ranks`: GPU rank 1 is listed more than once; list each rank of "
            "the node once",
        ),
        (
            TRAINER + "gpu_ranks: [0, 5000]}]}]",
            "config: `loops[0].nodes[1].gpu_ranks`: 5000 is not a GPU rank; write integers from 0 to 1023, "
            "e.g. [0, 1]",
        ),
        (
            TRAINER + "gpu_ranks: [-1]}]}]",
            "config: `loops[0].nodes[1].gpu_ranks`: -1 is not a GPU rank; write integers from 0 to 1023, "
            "e.g. [0, 1]",
        ),
        # our wording, not pydantic's
        (
            "store: {kind: duckdb, flavor: prometheus}",
            "config: `store`: flavor only applies to kind: prometheus; remove it or set kind: prometheus",
        ),
        (
            "store: {kind: duckdb, flavor: prometheus, buffer_dir: b}",
            "config: `store`: flavor, buffer_dir only apply to kind: prometheus; remove them or set kind: "
            "prometheus",
        ),
        (
            ENGINE + ", basic_auth: 'sm:s3cret'}",
            "config: `store.basic_auth` must be a mapping with username and password",
        ),
        (
            _model("deployments: [{id: d, instance_type: 1xH100}]"),
            "config: `models[0].deployments[0].instance_type` must be a mapping with any of gpu_type, "
            "gpu_count, name",
        ),
        (
            "organizations: [acme]",
            "config: `organizations[0]` must be a mapping with name (and optionally teams, api_keys)",
        ),
        ("models: {id: m}", "config: `models` must be a list"),
        (
            ENGINE + ", tenant_header: X-Scope-OrgID}",
            "config: `store.tenant_header` must be a mapping of names to values",
        ),
    ],
)
def test_limits_headers_ports_and_trainer_nodes_say_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "read", "expected"),
    [
        (
            "retention: 3650d\nscrape_interval: 1h\nscrape_timeout: 1h",
            lambda c: (c.retention, c.scrape_interval, c.scrape_timeout),
            (3650 * 86400.0, 3600.0, 3600.0),
        ),
        (
            ENGINE + ", bearer_token: 'abc.DEF-123_~+/='}",
            lambda c: c.store.bearer_token.get_secret_value(),
            "abc.DEF-123_~+/=",
        ),
        (
            ENGINE
            + ", basic_auth: {username: sm, password: 'p a$s'}, tenant_header: {X-Scope-OrgID: 'team a'}}",
            lambda c: (c.store.basic_auth.username, c.store.tenant_header),
            ("sm", {"X-Scope-OrgID": "team a"}),
        ),
        (
            _model(
                "deployments: [{id: d, replicas: [{id: r, targets: ['http://[::1]:65535/m', 'http://h/m']}]}]"
            ),
            lambda c: [str(t) for t in c.models[0].deployments[0].replicas[0].targets],
            ["http://[::1]:65535/m", "http://h/m"],
        ),
        (
            TRAINER + "gpu_ranks: [0, 1023], targets: [{url: 'http://127.0.0.1:9/m', kind: dcgm}, "
            "{url: 'http://127.0.0.1:9/n', kind: requests}]}]}]",
            lambda c: (c.loops[0].nodes[1].gpu_ranks, [t.kind for t in c.loops[0].nodes[1].targets]),
            ([0, 1023], ["dcgm", "requests"]),
        ),
    ],
)
def test_values_at_the_limits_are_accepted(text: str, read, expected) -> None:
    assert read(_parse(text)) == expected


def _yaml_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sm.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value).replace(str(path), "sm.yaml")


def test_yaml_errors_are_one_line_naming_the_file_line_and_column(tmp_path: Path) -> None:
    assert _yaml_error(tmp_path, "listen: [unclosed\n") == (
        "sm.yaml line 2, column 1 is not valid YAML: expected ',' or ']', but got '<stream end>' (while "
        "parsing a flow sequence at line 1, column 9); fix the file there"
    )
    assert _yaml_error(tmp_path, "listen: a\n  data_dir: b\n") == (
        "sm.yaml line 2, column 11 is not valid YAML: mapping values are not allowed here; fix the file there"
    )
    assert _yaml_error(tmp_path, "data_dir: x\nlisten: !!python/object/apply:os.system [id]\n") == (
        "sm.yaml line 2, column 9: the tag !!python/object/apply:os.system is not allowed; a config holds "
        "plain mappings, lists, strings and numbers: remove the tag"
    )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: " + "[" * 5000 + "]" * 5000, id="flow-lists"),
        pytest.param("a: " + "{b: " * 5000 + "1" + "}" * 5000, id="flow-mappings"),
        pytest.param("a:\n  " + "- " * 5000 + "1\n", id="block-lists"),
    ],
)
def test_deeply_nested_yaml_is_a_config_error(tmp_path: Path, text: str) -> None:
    assert _yaml_error(tmp_path, text) == (
        "sm.yaml nests lists or mappings too deeply to read; a config needs only a few levels: check the "
        "file's brackets and indentation"
    )


def _engine_config(tmp_path: Path, buffer_dir: str) -> object:
    return parse_config(
        {
            "data_dir": str(tmp_path / "data"),
            "store": {
                "kind": "prometheus",
                "flavor": "victoriametrics",
                "query_url": "http://127.0.0.1:8428",
                "remote_write_url": "http://127.0.0.1:8428/api/v1/write",
                "buffer_dir": buffer_dir,
            },
        }
    )


def test_open_registry_reports_a_buffer_dir_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError) as err:
        open_registry(_engine_config(tmp_path, str(afile)))  # type: ignore[arg-type]
    assert str(err.value) == (
        f"store.buffer_dir {afile} exists and is not a directory; point store.buffer_dir at a directory"
    )
    with pytest.raises(ConfigError) as err:
        open_registry(_engine_config(tmp_path, str(afile / "sub")))  # type: ignore[arg-type]
    assert str(err.value) == (
        f"cannot create store.buffer_dir {afile / 'sub'}: Not a directory; choose a writable directory"
    )
    open_registry(_engine_config(tmp_path, "buf")).close()  # type: ignore[arg-type]
    assert (tmp_path / "data" / "buf").is_dir()
