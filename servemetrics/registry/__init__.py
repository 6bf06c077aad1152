"""The registry: organizations, API keys, models, deployments, environments, promotions, replicas,
scrape targets, events and trainer (Loops) deployments, in SQL (SQLite by default, PostgreSQL by URL).
See docs/registry.md and docs/loops.md."""

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
    TrainerDeploymentInfo,
    TrainerNode,
    TrainerTarget,
    TrainerTargetInfo,
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
    "TrainerDeploymentInfo",
    "TrainerNode",
    "TrainerTarget",
    "TrainerTargetInfo",
    "can_invoke",
    "can_manage",
    "can_manage_keys",
    "can_read_metrics",
    "create_registry_engine",
]
