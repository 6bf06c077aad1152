"""What the registry returns (frozen dataclasses) and the errors it raises.

Errors: ``NotFound`` (no such model / deployment / environment / replica / promotion), ``Conflict`` (the
request clashes with the current state, e.g. a second promotion while one is in progress) and
``InvalidValue`` (a value out of range). The API maps them to 404, 409 and 400.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from servemetrics.registry.tables import TERMINAL_PROMOTION_STATUSES


class RegistryError(Exception):
    """Base of the registry's errors; ``str(err)`` says what is wrong and how to fix it."""


class NotFound(RegistryError, LookupError):
    """No such model, deployment, environment, replica or promotion."""


class Conflict(RegistryError):
    """The change clashes with the current state (e.g. a promotion already in progress)."""


class InvalidValue(RegistryError, ValueError):
    """A value is out of its allowed range or set."""


MAX_SETTING = 1_000_000
"""Upper bound of settings the platform leaves unbounded (replica counts, concurrency)."""

AUTOSCALING_RANGES: dict[str, tuple[int, int]] = {
    "min_replica": (0, MAX_SETTING),
    "max_replica": (1, MAX_SETTING),
    "autoscaling_window": (10, 3600),
    "scale_down_delay": (0, 3600),
    "concurrency_target": (1, MAX_SETTING),
    "target_utilization_percentage": (1, 100),
    "target_in_flight_tokens": (1, MAX_SETTING),
}
"""Allowed ``(min, max)`` of each autoscaling field; units: replicas, seconds, %, tokens."""

NULLABLE_AUTOSCALING: frozenset[str] = frozenset({"target_in_flight_tokens"})
"""Autoscaling fields that may be null (unset): ``target_in_flight_tokens`` (platform-facts §4, "early
access"): null scales on concurrency, a positive int on in-flight tokens (docs/gateway.md)."""


@dataclass(frozen=True)
class AutoscalingSettings:
    """``AutoscalingSettingsV1`` with the platform's defaults (windows and delays in seconds)."""

    min_replica: int = 0
    max_replica: int = 1
    autoscaling_window: int = 60
    scale_down_delay: int = 900
    concurrency_target: int = 1
    target_utilization_percentage: int = 70
    target_in_flight_tokens: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        """The settings as a plain dict (the API's JSON object)."""
        return asdict(self)


@dataclass(frozen=True)
class ModelInfo:
    """A model and the organization that owns it."""

    id: str
    name: str
    organization_id: int
    organization_name: str
    created_at_ms: int


@dataclass(frozen=True)
class DeploymentInfo:
    """One deployment (version) of a model; ``active_replica_count`` counts replicas in ACTIVE.
    ``autoscaling_known`` is True once its autoscaling settings were set through the API
    (``update_autoscaling``); before that ``autoscaling`` holds the platform's defaults, which say
    nothing about how the deployment is really scaled (no desired replicas are derived from them)."""

    id: str
    model_id: str
    name: str
    created_at_ms: int
    status: str
    instance_type_name: str
    gpu_type: str | None
    gpu_count: int
    autoscaling: AutoscalingSettings
    request_backpressure_policy: str | None
    labels: dict[str, str]
    active_replica_count: int
    autoscaling_known: bool = False


@dataclass(frozen=True)
class PromotionInfo:
    """A promotion of ``deployment_id`` into an environment that served ``previous_deployment_id``."""

    id: int
    environment_id: int
    deployment_id: str
    previous_deployment_id: str | None
    started_at_ms: int
    ended_at_ms: int | None
    rolling: bool
    status: str
    percent_traffic_to_new_version: int
    error_message: str | None = None

    @property
    def in_progress(self) -> bool:
        """True until the promotion SUCCEEDED, FAILED or was CANCELED."""
        return self.status not in TERMINAL_PROMOTION_STATUSES


@dataclass(frozen=True)
class EnvironmentInfo:
    """An environment: its settings, the deployment it points at and any promotion in progress."""

    id: int
    model_id: str
    name: str
    created_at_ms: int
    active: bool
    promotion_settings: dict[str, Any]
    autoscaling_settings: dict[str, Any] | None
    current_deployment_id: str | None
    candidate_deployment_id: str | None
    in_progress_promotion: PromotionInfo | None


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica of a deployment; ``id`` is its name inside the deployment."""

    id: str
    deployment_id: str
    status: str
    created_at_ms: int
    terminated_at_ms: int | None


@dataclass(frozen=True)
class TargetInfo:
    """A ``/metrics`` URL to scrape and the labels to attach to its series.

    ``environment`` is the environment the deployment serves ("" if none); ``rollout_phase`` is
    ``stable`` (the environment's deployment, no promotion running), ``promoting`` (both deployments of
    a running promotion: the platform's ``rollout_phase`` values, platform-facts §1) or
    "" when the deployment serves no environment. ``replica_status`` is STARTING or ACTIVE.
    """

    url: str
    model_id: str
    model_name: str
    deployment_id: str
    replica: str
    environment: str
    rollout_phase: str
    kind: str = "replica"
    labels: dict[str, str] = field(default_factory=dict)
    replica_status: str = "ACTIVE"


@dataclass(frozen=True)
class EventInfo:
    """One platform event of a model (``kind`` is one of ``tables.EVENT_KINDS``)."""

    id: int
    at_ms: int
    kind: str
    model_id: str
    deployment_id: str | None
    environment: str | None
    details: dict[str, Any]


@dataclass(frozen=True)
class TrainerTarget:
    """A scrape target of a trainer node: ``url`` and ``kind`` (one of ``tables.TRAINER_TARGET_KINDS``)."""

    url: str
    kind: str


@dataclass(frozen=True)
class TrainerNode:
    """One node (pod) of a trainer deployment.

    ``role`` is ``leader`` or ``worker``; ``gpu_ranks`` are the DCGM ``gpu`` indexes the node's GPU
    fields are keyed by (empty: whatever the exporter reports); ``pod`` / ``namespace`` restrict the
    kubelet series (cAdvisor, Summary API) to that pod (None: every pod the kubelet reports).
    """

    node_id: str
    role: str
    gpu_ranks: tuple[int, ...] = ()
    pod: str | None = None
    namespace: str | None = None
    targets: tuple[TrainerTarget, ...] = ()


@dataclass(frozen=True)
class TrainerDeploymentInfo:
    """A trainer (Loops) deployment: its nodes (leader first) and the model deployment of its sampler."""

    id: str
    organization_id: int
    name: str
    created_at_ms: int
    sampler_model_id: str | None
    sampler_deployment_id: str | None
    nodes: tuple[TrainerNode, ...]

    @property
    def leader(self) -> TrainerNode:
        """The leader node (a trainer deployment always has exactly one)."""
        return next(n for n in self.nodes if n.role == "leader")


@dataclass(frozen=True)
class TrainerTargetInfo:
    """A trainer node's target as the scraper needs it: URL, kind, trainer deployment and node."""

    url: str
    kind: str
    trainer_deployment_id: str
    node_id: str
    role: str
