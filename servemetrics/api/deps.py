"""FastAPI dependencies: the registry, the caller's API key, and model / deployment / environment lookups.

Every lookup is scoped to the caller's organization: another organization's model (or one outside a
scoped key's ``model_ids``) is a 404, never a 403. A key whose type may not do something at all (an
invoke-only key reading metrics, an export key promoting) gets a 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Request

from servemetrics.api.errors import forbidden, not_found, unauthorized
from servemetrics.registry import (
    DeploymentInfo,
    EnvironmentInfo,
    KeyInfo,
    ModelInfo,
    Registry,
    can_manage,
    can_read_metrics,
)

_HOW = "send `Authorization: Api-Key <key>` or `Authorization: Bearer <key>`"
DEPLOYMENT_ALIASES = ("production", "development")
"""Deployment ids that name the deployment an environment of that name points at."""


def get_registry(request: Request) -> Registry:
    """The registry the app was built with (``app.state.registry``)."""
    registry: Registry = request.app.state.registry
    return registry


RegistryDep = Annotated[Registry, Depends(get_registry)]


def parse_authorization(header: str | None) -> str:
    """The key in ``Bearer <key>`` or ``Api-Key <key>``; raises 401 saying which header to send."""
    if not header:
        raise unauthorized(f"missing API key: {_HOW}")
    scheme, _, key = header.strip().partition(" ")
    if scheme.lower() not in ("bearer", "api-key") or not key.strip():
        raise unauthorized(f"malformed Authorization header: {_HOW}")
    return key.strip()


def authenticate(
    registry: RegistryDep, authorization: Annotated[str | None, Header(include_in_schema=False)] = None
) -> KeyInfo:
    """The caller's key; 401 when the header is missing, malformed or names no stored key."""
    key = registry.authenticate(parse_authorization(authorization))
    if key is None:
        raise unauthorized(f"invalid API key: {_HOW} with a key of your organization")
    return key


Auth = Annotated[KeyInfo, Depends(authenticate)]


def require_manage(key: Auth) -> KeyInfo:
    """The caller's key if it may manage (PERSONAL or WORKSPACE_MANAGE_ALL), else 403."""
    if not can_manage(key):
        raise forbidden(f"a {key.type} key cannot change models; use a WORKSPACE_MANAGE_ALL or PERSONAL key")
    return key


ManageAuth = Annotated[KeyInfo, Depends(require_manage)]


def resolve_model(registry: Registry, key: KeyInfo, model_id: str) -> ModelInfo:
    """Model ``model_id`` visible to ``key``; 404 if missing, another organization's or out of scope."""
    model = registry.model(model_id, key.organization_id)
    if model is None or (key.model_ids is not None and model_id not in key.model_ids):
        raise not_found(f"no model {model_id!r}; list your models with GET /v1/models")
    return model


def require_metrics_read(registry: RegistryDep, key: Auth, model_id: Annotated[str, Path()]) -> ModelInfo:
    """The path's model if the key may read its metrics and state; 403 for a key type that never may."""
    model = resolve_model(registry, key, model_id)
    if not can_read_metrics(key, model_id):
        raise forbidden(
            f"a {key.type} key cannot read metrics; use a WORKSPACE_EXPORT_METRICS, "
            "WORKSPACE_MANAGE_ALL or PERSONAL key"
        )
    return model


def require_manage_model(
    registry: RegistryDep, key: ManageAuth, model_id: Annotated[str, Path()]
) -> ModelInfo:
    """The path's model if the key may manage it (404 before 403: another org's model stays invisible)."""
    return resolve_model(registry, key, model_id)


ReadModel = Annotated[ModelInfo, Depends(require_metrics_read)]
ManageModel = Annotated[ModelInfo, Depends(require_manage_model)]


def resolve_deployment(registry: Registry, model: ModelInfo, deployment_id: str) -> DeploymentInfo:
    """Deployment ``deployment_id`` of the model (``production`` / ``development`` = that environment's
    current deployment); 404 when there is none."""
    wanted = deployment_id
    if deployment_id in DEPLOYMENT_ALIASES:
        env = registry.environment(model.id, deployment_id)
        wanted = env.current_deployment_id if env and env.current_deployment_id else ""
    found = registry.deployment(model.id, wanted) if wanted else None
    if found is None:
        raise not_found(
            f"model {model.id!r} has no deployment {deployment_id!r}; list them with "
            f"GET /v1/models/{model.id}/deployments"
        )
    return found


def resolve_environment(registry: Registry, model: ModelInfo, env_name: str) -> EnvironmentInfo:
    """Environment ``env_name`` of the model; 404 when there is none."""
    found = registry.environment(model.id, env_name)
    if found is None:
        raise not_found(
            f"model {model.id!r} has no environment {env_name!r}; list them with "
            f"GET /v1/models/{model.id}/environments"
        )
    return found
