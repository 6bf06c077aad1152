"""The registry: organizations, API keys, models, deployments, environments, promotions, replicas,
scrape targets and events, in SQL (SQLite by default, PostgreSQL by URL). See docs/registry.md."""

from servemetrics.registry.keys import KeyInfo, can_invoke, can_manage, can_manage_keys, can_read_metrics
from servemetrics.registry.records import (
    AutoscalingSettings,
    Conflict,
    DeploymentInfo,
    EnvironmentInfo,
    EventInfo,
    InvalidValue,
    ModelInfo,
    NotFound,
    PromotionInfo,
    RegistryError,
    ReplicaInfo,
    TargetInfo,
)
from servemetrics.registry.registry import Registry, create_registry_engine
from servemetrics.registry.tables import EVENT_KINDS

__all__ = [
    "EVENT_KINDS",
    "AutoscalingSettings",
    "Conflict",
    "DeploymentInfo",
    "EnvironmentInfo",
    "EventInfo",
    "InvalidValue",
    "KeyInfo",
    "ModelInfo",
    "NotFound",
    "PromotionInfo",
    "Registry",
    "RegistryError",
    "ReplicaInfo",
    "TargetInfo",
    "can_invoke",
    "can_manage",
    "can_manage_keys",
    "can_read_metrics",
    "create_registry_engine",
]
