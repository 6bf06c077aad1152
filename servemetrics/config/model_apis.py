"""The config file's teams and Model APIs (docs/configuration.md "Model APIs", docs/model-apis.md).

``organizations[].teams`` lists an organization's teams (``TeamConfig``); an API key joins one with
``team:``. ``model_apis`` lists the shared OpenAI-compatible endpoints (``ModelApiConfig``): a name, the
model and environment (or deployment) that serve it, and rate limits per team (``limits``: every team's
default, ``team_limits``: a team's own), in requests and tokens per minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, Field, model_validator

from servemetrics.config.validators import (
    DeploymentId,
    EnvironmentName,
    ModelId,
    Strict,
    check_organization,
    no_duplicates,
    unknown_name,
)
from servemetrics.registry.ids import check_id

if TYPE_CHECKING:
    from servemetrics.config.model import ModelConfig, OrganizationConfig

TeamId = Annotated[str, AfterValidator(lambda v: check_id(v, "team id"))]
ModelApiName = Annotated[str, AfterValidator(lambda v: check_id(v, "Model API name"))]

RESERVED_NAMES = frozenset({"usage"})
"""Model API names that would shadow a route (``GET /v1/model_apis/usage``)."""
MAX_PER_MINUTE = 1_000_000_000
"""The largest requests or tokens per minute a limit may give."""


class TeamConfig(Strict):
    """A team of an organization: ``id`` (what ``team_id`` labels and keys' ``team`` name) and a name."""

    id: TeamId
    name: str | None = None


class LimitConfig(Strict):
    """Rate limits: requests and tokens (input + output) per minute; absent: no limit of that kind."""

    requests_per_minute: int | None = Field(default=None, ge=1, le=MAX_PER_MINUTE)
    tokens_per_minute: int | None = Field(default=None, ge=1, le=MAX_PER_MINUTE)


class ModelApiConfig(Strict):
    """One Model API: ``name`` (what callers send as ``model``), its ``organization``, served by
    ``environment`` (default ``production``) or ``deployment`` of ``model``; ``limits`` apply to every
    team (and to keys without one) unless ``team_limits`` gives the team its own."""

    name: ModelApiName
    organization: str
    model: ModelId
    environment: EnvironmentName | None = None
    deployment: DeploymentId | None = None
    display_name: str | None = None
    description: str = ""
    context_length: int = Field(default=0, ge=0, le=100_000_000)
    limits: LimitConfig = LimitConfig()
    team_limits: dict[TeamId, LimitConfig] = {}

    @model_validator(mode="after")
    def _check(self) -> ModelApiConfig:
        if self.name in RESERVED_NAMES:
            raise ValueError(f"Model API name {self.name!r} is reserved (a route's); choose another name")
        if self.environment is not None and self.deployment is not None:
            raise ValueError(
                f"Model API {self.name!r} gives environment and deployment; give one (the environment "
                "follows promotions)"
            )
        return self


def check_model_apis(
    apis: Sequence[ModelApiConfig], organizations: Sequence[OrganizationConfig], models: Sequence[ModelConfig]
) -> None:
    """ValueError saying what to fix unless: Model API names are unique per organization; each is
    served by a model of its organization, through one of that model's environments (declared) or
    deployments; its ``team_limits`` name teams of its organization."""
    orgs = {o.name: o for o in organizations}
    by_id = {m.id: m for m in models}
    no_duplicates([f"{a.organization}/{a.name}" for a in apis], "Model API (organization/name)")
    for api in apis:
        where = f"model_apis[{api.name}]"
        check_organization(where, api.organization, list(orgs))
        model = by_id.get(api.model)
        if model is None or model.organization != api.organization:
            raise unknown_name(
                f"{where}.model {api.model!r} is not a model of organization {api.organization!r}",
                "declare it under models or use one of",
                (m.id for m in models if m.organization == api.organization),
            )
        _check_server(where, api, model)
        teams = [team.id for team in orgs[api.organization].teams]
        for team in api.team_limits:
            if team not in teams:
                raise unknown_name(
                    f"{where}.team_limits names team {team!r}, which is not under organization "
                    f"{api.organization!r}'s teams",
                    "declare it there or use one of",
                    teams,
                )


def _check_server(where: str, api: ModelApiConfig, model: ModelConfig) -> None:
    """The Model API's ``deployment`` is one of the model's, or its ``environment`` is declared."""
    if api.deployment is not None:
        if api.deployment not in {d.id for d in model.deployments}:
            raise unknown_name(
                f"{where}.deployment {api.deployment!r} is not a deployment of model {model.id!r}",
                "use one of",
                (d.id for d in model.deployments),
            )
        return
    envs = [e.name for e in model.environments]
    if (api.environment or "production") not in envs:
        raise unknown_name(
            f"{where}.environment {api.environment or 'production'!r} is not an environment of "
            f"model {model.id!r}",
            "declare it there or use one of",
            envs,
        )
