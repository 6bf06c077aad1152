"""SQLAlchemy Core tables of the registry (one ``METADATA``; times are int64 epoch milliseconds).

Identity: models and deployments have string ids unique in the whole registry (``abc123``);
environments, replicas and promotions have integer surrogate keys and are named inside their parent
(``production`` inside a model, replica ``r1`` inside a deployment). Enumerations are stored as strings
and listed here as tuples so validation, docs and tests share one table.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

DEPLOYMENT_STATUSES = (
    "BUILDING",
    "DEPLOYING",
    "DEPLOY_FAILED",
    "LOADING_MODEL",
    "ACTIVE",
    "UNHEALTHY",
    "BUILD_FAILED",
    "BUILD_STOPPED",
    "DEACTIVATING",
    "INACTIVE",
    "FAILED",
    "UPDATING",
    "SCALED_TO_ZERO",
    "WAKING_UP",
)
"""``DeploymentV1.status`` values (platform-facts §4)."""

PROMOTION_STATUSES = ("RELEASING", "RAMPING_UP", "RAMPING_DOWN", "PAUSED", "SUCCEEDED", "FAILED", "CANCELED")
"""``in_progress_promotion.status`` values; the last three are terminal."""

TERMINAL_PROMOTION_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELED"})

PROMOTION_ACTIONS = ("START", "STEP", "PAUSE", "RESUME", "CANCEL", "FORCE_CANCEL", "ROLL_FORWARD")
"""``promotion_steps.action``: what happened to the promotion at ``at_ms``."""

REPLICA_STATUSES = ("STARTING", "ACTIVE", "TERMINATED", "FAILED")
SERVING_REPLICA_STATUSES = ("STARTING", "ACTIVE")
"""Replicas in these statuses are scraped and routed to (``Registry.list_targets``' default)."""
ENDED_REPLICA_STATUSES = frozenset({"FAILED", "TERMINATED"})
"""Replicas that ended: ``terminated_at_ms`` set; a FAILED one is still health-checked (docs/gateway.md)."""

BACKPRESSURE_POLICIES = ("QUEUE_ON_FULL", "REJECT_ON_FULL")

EVENT_KINDS = (
    "DEPLOYED",
    "PROMOTED",
    "PROMOTION_CONTROL",
    "AUTOSCALING_CHANGED",
    "ACTIVATED",
    "DEACTIVATED",
    "INSTANCE_TYPE_CHANGED",
    "REPLICA_TERMINATED",
    "ENVIRONMENT_UPDATED",
    "REPLICA_RECOVERED",
)
"""The nine event kinds of the dashboard's Events overlay (metrics-dashboard.md "Events"), then ours:
``REPLICA_RECOVERED``, a FAILED or TERMINATED replica back to ACTIVE (healthy again, or registered
again), which the spec's nine have no kind for (calling it "Replica terminated" would say the opposite)."""

METADATA = MetaData()

Ms = BigInteger

organizations = Table(
    "organizations",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created_at_ms", Ms, nullable=False),
)

api_keys = Table(
    "api_keys",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),  # hex HMAC-SHA256, never the key
    Column("prefix", String(32), nullable=False),
    Column("type", String(40), nullable=False),
    Column("model_ids", JSON, nullable=True),  # list[str] scope, or null for every model
    Column("name", String(200), nullable=True),
    Column("source", String(10), nullable=False, default="api"),  # "config" or "api"
    Column("created_at_ms", Ms, nullable=False),
    Column("team_id", String(100), nullable=True),  # the key's team (``teams.team_id``), or null
)

teams = Table(
    "teams",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("team_id", String(100), nullable=False),  # the public id, unique inside its organization
    Column("name", String(200), nullable=False),
    Column("created_at_ms", Ms, nullable=False),
    UniqueConstraint("organization_id", "team_id", name="uq_teams_org_team"),
)
"""Teams of an organization: groups of its API keys (migration ``0008``; docs/model-apis.md)."""

model_apis = Table(
    "model_apis",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),  # the slug callers send as ``model``
    Column("display_name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("model_id", ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
    Column("environment", String(100), nullable=True),  # served by this environment of the model, or
    Column("deployment_id", String(100), nullable=True),  # by this one deployment
    Column("context_length", Integer, nullable=False),
    Column("limits", JSON, nullable=False),  # {"": {rpm, tpm}, team_id: {rpm, tpm}}; null values: none
    Column("created_at_ms", Ms, nullable=False),
    UniqueConstraint("organization_id", "name", name="uq_model_apis_org_name"),
)
"""Model APIs: shared OpenAI-compatible endpoints served by a model's environment or deployment, with
per-team rate limits (``registry/model_apis.py``; migration ``0008``)."""

registry_secrets = Table(
    "registry_secrets",
    METADATA,
    Column("name", String(50), primary_key=True),
    Column("value", String(200), nullable=False),
)

models = Table(
    "models",
    METADATA,
    Column("id", String(100), primary_key=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("created_at_ms", Ms, nullable=False),
)

deployments = Table(
    "deployments",
    METADATA,
    Column("id", String(100), primary_key=True),
    Column("model_id", ForeignKey("models.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("created_at_ms", Ms, nullable=False),
    Column("status", String(20), nullable=False, default="ACTIVE"),
    Column("instance_type_name", String(100), nullable=False, default="CPU"),
    Column("gpu_type", String(50), nullable=True),
    Column("gpu_count", Integer, nullable=False, default=0),
    Column("min_replica", Integer, nullable=False, default=0),
    Column("max_replica", Integer, nullable=False, default=1),
    Column("autoscaling_window", Integer, nullable=False, default=60),  # seconds
    Column("scale_down_delay", Integer, nullable=False, default=900),  # seconds
    Column("concurrency_target", Integer, nullable=False, default=1),
    Column("target_utilization_percentage", Integer, nullable=False, default=70),
    Column("target_in_flight_tokens", Integer, nullable=True),  # tokens; null: scale on concurrency
    # when autoscaling settings were last set through the API; null: never (the defaults stand in)
    Column("autoscaling_set_at_ms", Ms, nullable=True),
    Column("request_backpressure_policy", String(20), nullable=True),
    Column("labels", JSON, nullable=True),
)

environments = Table(
    "environments",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("model_id", ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("created_at_ms", Ms, nullable=False),
    Column("active", Boolean, nullable=False, default=True),
    Column("promotion_settings", JSON, nullable=False),
    Column("autoscaling_settings", JSON, nullable=True),
    UniqueConstraint("model_id", "name", name="uq_environments_model_name"),
)

environment_activations = Table(
    "environment_activations",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("environment_id", ForeignKey("environments.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("at_ms", Ms, nullable=False),
    Column("active", Boolean, nullable=False),
)

promotions = Table(
    "promotions",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("environment_id", ForeignKey("environments.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("deployment_id", ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
    Column("previous_deployment_id", ForeignKey("deployments.id", ondelete="SET NULL"), nullable=True),
    Column("started_at_ms", Ms, nullable=False),
    Column("ended_at_ms", Ms, nullable=True),
    Column("rolling", Boolean, nullable=False),
    Column("status", String(20), nullable=False),
    Column("percent_traffic_to_new_version", Integer, nullable=False),
    Column("error_message", Text, nullable=True),
)

promotion_steps = Table(
    "promotion_steps",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("promotion_id", ForeignKey("promotions.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("at_ms", Ms, nullable=False),
    Column("action", String(20), nullable=False),
    Column("percent", Integer, nullable=False),
)

replicas = Table(
    "replicas",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("deployment_id", ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("status", String(20), nullable=False, default="ACTIVE"),
    Column("created_at_ms", Ms, nullable=False),
    Column("terminated_at_ms", Ms, nullable=True),
    UniqueConstraint("deployment_id", "name", name="uq_replicas_deployment_name"),
)

targets = Table(
    "targets",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("replica_id", ForeignKey("replicas.id", ondelete="CASCADE"), nullable=False),
    Column("url", String(2000), nullable=False),
    Column("kind", String(50), nullable=False, default="replica"),
    Column("labels", JSON, nullable=True),
    UniqueConstraint("replica_id", "url", name="uq_targets_replica_url"),
)

events = Table(
    "events",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at_ms", Ms, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("model_id", ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
    Column("deployment_id", String(100), nullable=True),
    Column("environment", String(100), nullable=True),
    Column("details", JSON, nullable=False),
    Index("ix_events_model_at", "model_id", "at_ms"),
)

ASYNC_REQUEST_STATUSES = ("QUEUED", "IN_PROGRESS", "SUCCEEDED", "FAILED", "EXPIRED")
"""``async_requests.status`` values (docs/gateway.md "Async requests"); the last three are terminal."""

WEBHOOK_STATUSES = ("PENDING", "DELIVERED", "FAILED")
"""``async_requests.webhook_status`` values (null: no webhook, or nothing to deliver yet)."""

async_requests = Table(
    "async_requests",
    METADATA,
    Column("seq", Integer, primary_key=True, autoincrement=True),  # arrival order (FIFO)
    Column("id", String(64), nullable=False, unique=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("model_id", ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
    Column("environment", String(100), nullable=False),
    Column("deployment_id", String(100), nullable=True),  # null until routed
    Column("status", String(20), nullable=False),
    Column("model_input", Text, nullable=False),  # JSON text, sent as the replica's request body
    Column("webhook_endpoint", String(2000), nullable=True),
    Column("max_time_in_queue_s", Integer, nullable=False),
    Column("created_at_ms", Ms, nullable=False),
    Column("started_at_ms", Ms, nullable=True),
    Column("finished_at_ms", Ms, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("response_status", Integer, nullable=True),
    Column("result", Text, nullable=True),  # the replica's body (bounded), decoded as UTF-8
    Column("errors", JSON, nullable=True),  # list of {"code", "message"}
    Column("webhook_status", String(20), nullable=True),
    Column("webhook_attempts", Integer, nullable=False, default=0),
    Column("webhook_last_error", Text, nullable=True),
    Column("webhook_next_at_ms", Ms, nullable=True),  # when the next delivery attempt is due
    Index("ix_async_requests_status_seq", "status", "seq"),
)
"""Async inference requests (servemetrics/gateway/queued_store.py): they survive a restart."""

TRAINER_NODE_ROLES = ("leader", "worker")
"""``trainer_nodes.role``: one leader per trainer deployment, any number of workers."""

TRAINER_TARGET_KINDS = ("dcgm", "kubelet", "kubelet_summary", "node_exporter", "requests")
"""``trainer_targets.kind``: what a trainer node's target serves (docs/loops.md "Sources")."""

trainer_deployments = Table(
    "trainer_deployments",
    METADATA,
    Column("id", String(100), primary_key=True),
    Column("organization_id", ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("created_at_ms", Ms, nullable=False),
    # the sampler half: an ordinary model deployment (read through the model metrics endpoints)
    Column("sampler_model_id", ForeignKey("models.id", ondelete="SET NULL"), nullable=True),
    Column("sampler_deployment_id", String(100), nullable=True),
)
"""Trainer (Loops) deployments (servemetrics/registry/trainers.py, docs/loops.md)."""

trainer_nodes = Table(
    "trainer_nodes",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "trainer_deployment_id",
        ForeignKey("trainer_deployments.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("node_id", String(200), nullable=False),
    Column("position", Integer, nullable=False),  # order of the nodes as declared
    Column("role", String(10), nullable=False),
    Column("gpu_ranks", JSON, nullable=False),  # list[int]: the DCGM ``gpu`` indexes of the node
    Column("pod", String(253), nullable=True),  # kubelet series of this pod only (None: every pod)
    Column("namespace", String(253), nullable=True),
    UniqueConstraint("trainer_deployment_id", "node_id", name="uq_trainer_nodes_deployment_node"),
)

trainer_targets = Table(
    "trainer_targets",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_pk", ForeignKey("trainer_nodes.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("url", String(2000), nullable=False),
    Column("kind", String(30), nullable=False),
    UniqueConstraint("node_pk", "url", name="uq_trainer_targets_node_url"),
)

STARTUP_SOURCES = ("lifecycle", "kube_state")
"""``startup_attempts.source``: what observed the attempt (``registry.startup_marks.PHASES``)."""

startup_attempts = Table(
    "startup_attempts",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("deployment_id", ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
    Column("replica", String(200), nullable=False),
    Column("source", String(20), nullable=False),
    Column("attempt_key", String(300), nullable=False),  # lifecycle: the start ms; kube_state: the pod uid
    Column("started_at_ms", Ms, nullable=False),
    Column("ready_at_ms", Ms, nullable=True),
    Column("ended_at_ms", Ms, nullable=True),  # ended before ready (FAILED)
    Column("marks", JSON, nullable=False),  # {mark name: epoch ms}
    UniqueConstraint("deployment_id", "replica", "source", "attempt_key", name="uq_startup_attempts_key"),
    Index("ix_startup_attempts_deployment_started", "deployment_id", "started_at_ms"),
)
"""Replica startup attempts (servemetrics/registry/startups.py; docs/management.md "Startup times")."""
