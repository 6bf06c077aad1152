"""Teams and Model APIs: the config's checks, ``apply_config`` into the registry, the registry part
(``registry.model_apis``) and migration ``0008``, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from sqlalchemy import delete, inspect, text

from servemetrics.config import ConfigError, apply_config, parse_config
from servemetrics.registry import InvalidValue, NotFound, Registry
from servemetrics.registry.migrations import migrate, schema_migrations
from servemetrics.registry.model_apis import DEFAULT_TEAM, ModelApiInfo, RateLimits

CONFIG = """
organizations:
  - name: acme
    teams: [{id: team-a, name: Team A}, {id: team-b}]
    api_keys:
      - {key: admin-key, type: WORKSPACE_MANAGE_ALL}
      - {key: a-key, type: WORKSPACE_INVOKE, team: team-a}
  - name: other
    api_keys: [{key: other-key, type: WORKSPACE_MANAGE_ALL}]
models:
  - id: m1
    organization: acme
    deployments: [{id: d1}, {id: d2}]
    environments: [{name: production, promotions: [{deployment: d1, at: "2026-01-01T00:00:00Z"}]}]
  - id: m9
    organization: other
    deployments: [{id: x1}]
    environments: [{name: production}]
model_apis:
  - name: chat
    organization: acme
    model: m1
    display_name: Chat
    context_length: 8192
    limits: {requests_per_minute: 60, tokens_per_minute: 10000}
    team_limits: {team-a: {requests_per_minute: 5}}
  - {name: pinned, organization: acme, model: m1, deployment: d2}
"""


def _config(changes: dict[str, Any] | None = None) -> Any:
    data = yaml.safe_load(CONFIG)
    data.update(changes or {})
    return parse_config(data)


def test_apply_stores_teams_team_keys_and_model_apis(registry: Registry) -> None:
    apply_config(_config(), registry)
    acme = registry.tenancy.organization_id("acme")
    assert acme is not None
    assert [(t.team_id, t.name) for t in registry.model_apis.list_teams(acme)] == [
        ("team-a", "Team A"),
        ("team-b", "team-b"),
    ]
    key = registry.tenancy.authenticate("a-key")
    admin = registry.tenancy.authenticate("admin-key")
    assert key is not None and key.team_id == "team-a"
    assert admin is not None and admin.team_id is None
    chat = registry.model_apis.model_api(acme, "chat")
    assert chat is not None
    assert (chat.model_id, chat.environment, chat.deployment_id, chat.context_length) == (
        "m1",
        "production",
        None,
        8192,
    )
    assert chat.display_name == "Chat"
    assert chat.limits_of("team-a") == RateLimits(5, None)  # the team's own entry, not merged
    assert chat.limits_of("team-b") == RateLimits(60, 10000)
    assert chat.limits_of(None) == RateLimits(60, 10000)
    pinned = registry.model_apis.model_api(acme, "pinned")
    assert pinned is not None and (pinned.environment, pinned.deployment_id) == (None, "d2")
    assert pinned.limits_of("team-a") == RateLimits(None, None)
    assert [a.name for a in registry.model_apis.list_model_apis(acme)] == ["chat", "pinned"]
    other = registry.tenancy.organization_id("other")
    assert other is not None and registry.model_apis.model_api(other, "chat") is None


def test_reapply_is_idempotent_and_drops_model_apis_gone_from_the_file(registry: Registry) -> None:
    apply_config(_config(), registry)
    apply_config(_config(), registry)
    acme = registry.tenancy.organization_id("acme")
    assert acme is not None
    first = registry.model_apis.model_api(acme, "chat")
    data = yaml.safe_load(CONFIG)
    apply_config(parse_config({**data, "model_apis": data["model_apis"][:1]}), registry)
    assert [a.name for a in registry.model_apis.list_model_apis(acme)] == ["chat"]
    assert registry.model_apis.model_api(acme, "chat") == first


def test_the_registry_refuses_foreign_models_unknown_teams_and_two_servers(registry: Registry) -> None:
    apply_config(_config(), registry)
    with pytest.raises(NotFound, match="no model 'm9' in organization 'acme'"):
        registry.model_apis.put_model_api("acme", "x", model_id="m9")
    with pytest.raises(InvalidValue, match="unknown teams team-z; declare them .*: team-a, team-b"):
        registry.model_apis.put_model_api("acme", "x", model_id="m1", limits={"team-z": RateLimits(1)})
    with pytest.raises(InvalidValue, match="environment or deployment, not both"):
        registry.model_apis.put_model_api(
            "acme", "x", model_id="m1", environment="production", deployment_id="d1"
        )
    with pytest.raises(InvalidValue, match="no team 'team-z'; use one of: team-a, team-b"):
        registry.tenancy.create_api_key("acme", "WORKSPACE_INVOKE", team_id="team-z")
    _, key = registry.tenancy.create_api_key("acme", "WORKSPACE_INVOKE", team_id="team-b")
    assert key.team_id == "team-b"


def test_limits_of_falls_back_to_the_default_then_to_none() -> None:
    api = ModelApiInfo("c", 1, "c", "", "m", "production", None, 0, {DEFAULT_TEAM: RateLimits(10, 20)})
    assert api.limits_of("t") == RateLimits(10, 20)
    bare = ModelApiInfo("c", 1, "c", "", "m", "production", None, 0, {"t": RateLimits(None, 5)})
    assert bare.limits_of("t") == RateLimits(None, 5)
    assert bare.limits_of("u") == RateLimits(None, None)


def test_migration_0008_adds_the_team_column_to_an_older_schema(registry: Registry) -> None:
    with registry.engine.begin() as conn:
        conn.execute(text("ALTER TABLE api_keys DROP COLUMN team_id"))
        conn.execute(text("DROP TABLE model_apis"))
        conn.execute(text("DROP TABLE teams"))
        conn.execute(delete(schema_migrations).where(schema_migrations.c.name == "0008_model_apis"))
    assert migrate(registry.engine) == ["0008_model_apis"]
    inspector = inspect(registry.engine)
    assert "team_id" in {c["name"] for c in inspector.get_columns("api_keys")}
    assert {"teams", "model_apis"} <= set(inspector.get_table_names())
    assert migrate(registry.engine) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {
                "organizations": [
                    {"name": "acme", "api_keys": [{"key": "k", "type": "PERSONAL", "team": "t"}]}
                ]
            },
            "names team 't', which is not under its teams; declare it there or use one of: (none)",
        ),
        (
            {"model_apis": [{"name": "usage", "organization": "acme", "model": "m1"}]},
            "Model API name 'usage' is reserved",
        ),
        (
            {"model_apis": [{"name": "c", "organization": "acme", "model": "m9"}]},
            "model_apis[c].model 'm9' is not a model of organization 'acme'; declare it under models or use "
            "one of: m1",
        ),
        (
            {"model_apis": [{"name": "c", "organization": "acme", "model": "m1", "environment": "staging"}]},
            "model_apis[c].environment 'staging' is not an environment of model 'm1'; declare it there "
            "or use one of: production",
        ),
        (
            {"model_apis": [{"name": "c", "organization": "acme", "model": "m1", "deployment": "d7"}]},
            "model_apis[c].deployment 'd7' is not a deployment of model 'm1'; use one of: d1, d2",
        ),
        (
            {
                "model_apis": [
                    {
                        "name": "c",
                        "organization": "acme",
                        "model": "m1",
                        "environment": "production",
                        "deployment": "d1",
                    }
                ]
            },
            "gives environment and deployment; give one",
        ),
        (
            {
                "model_apis": [
                    {"name": "c", "organization": "acme", "model": "m1", "team_limits": {"team-z": {}}}
                ]
            },
            "model_apis[c].team_limits names team 'team-z', which is not under organization 'acme''s teams; "
            "declare it there or use one of: team-a, team-b",
        ),
        (
            {
                "model_apis": [
                    {"name": "c", "organization": "acme", "model": "m1", "limits": {"requests_per_minute": 0}}
                ]
            },
            "requests_per_minute",
        ),
        (
            {"model_apis": [{"name": "c", "organization": "acme", "model": "m1"}] * 2},
            "duplicate Model API (organization/name) acme/c; each must be unique",
        ),
    ],
)
def test_config_mistakes_say_what_to_fix(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(changes)
    assert message in str(err.value)
