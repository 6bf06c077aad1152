"""The registry: organizations, API keys, models, deployments, environments, promotions, replicas,
scrape targets, events and trainer (Loops) deployments, in SQL (SQLite by default, PostgreSQL by URL).
``Registry`` is composed of parts: ``registry.tenancy``, ``.deployments``, ``.environments``, ``.events``
and ``.trainers``. See docs/registry.md and docs/loops.md."""

from servemetrics.registry.deployments import Deployments
from servemetrics.registry.environments import Environments
from servemetrics.registry.events import Events
from servemetrics.registry.keys import (
    KeyInfo,
    can_invoke,
    can_manage,
    can_manage_keys,
    can_read_metrics,
    team_bound,
)
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
from servemetrics.registry.tables import EVENT_KINDS, REPLICA_STATUSES
from servemetrics.registry.tenancy import Tenancy
from servemetrics.registry.trainers import Trainers

__all__ = [
    "EVENT_KINDS",
    "REPLICA_STATUSES",
    "AutoscalingSettings",
    "Conflict",
    "DeploymentInfo",
    "Deployments",
    "EnvironmentInfo",
    "Environments",
    "EventInfo",
    "Events",
    "InvalidValue",
    "KeyInfo",
    "ModelInfo",
    "NotFound",
    "PromotionInfo",
    "Registry",
    "RegistryError",
    "ReplicaInfo",
    "TargetInfo",
    "Tenancy",
    "TrainerDeploymentInfo",
    "TrainerNode",
    "TrainerTarget",
    "TrainerTargetInfo",
    "Trainers",
    "can_invoke",
    "can_manage",
    "can_manage_keys",
    "team_bound",
    "can_read_metrics",
    "create_registry_engine",
]
