"""The answers of ``GET /v1/loops/deployments`` and ``GET /v1/loops/deployments/{id}``: a trainer deployment
as the platform's ``LoopsDeploymentV1`` (what its SDK, PyPI ``baseten`` 0.13.1, parses) plus our own
fields (``name``, ``metrics_url``, ``nodes``). docs/management.md "Fields we cannot fill" lists the
fields we cannot fill and the neutral values they get.
"""

from __future__ import annotations

from typing import Any

from servemetrics.api.management_shapes import instance_type_v1
from servemetrics.registry import Registry, TrainerDeploymentInfo, TrainerNode
from servemetrics.timeutil import iso_ms
from servemetrics.types import redact_url

NO_USER: dict[str, Any] = {"email": None}
"""``user`` of every trainer and sampler: API keys belong to organizations, not users."""
TRAINER_STATUS = "CREATED"
"""``status.name`` of every trainer: it is declared; the registry follows no trainer lifecycle."""
UNKNOWN_STATUS = "UNKNOWN"
"""``status.name`` of a sampler that names no deployment (a model only): there is no status to report."""


def _node_v1(node: TrainerNode) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "role": node.role,
        "gpu_ranks": list(node.gpu_ranks),
        "pod": node.pod,
        "namespace": node.namespace,
        "targets": [{"url": redact_url(t.url), "kind": t.kind} for t in node.targets],
    }


def _trainer_instance_type(trainer: TrainerDeploymentInfo) -> dict[str, Any]:
    """``InstanceTypeV1`` of the trainer: the neutral one of ``instance_type_v1`` with ``gpu_count`` the
    leader's declared GPU ranks."""
    return {**instance_type_v1(None), "gpu_count": len(trainer.leader.gpu_ranks)}


def sampler_v1(registry: Registry, trainer: TrainerDeploymentInfo) -> dict[str, Any] | None:
    """``LoopsSamplerV1`` of the trainer's sampler (None when it has none): ``id`` the sampler's model
    deployment id (the model id when it names no deployment), ``created_at``, ``status`` and
    ``instance_type`` that deployment's (the model's creation time and ``UNKNOWN_STATUS`` without one),
    ``base_url`` and ``base_model`` "" (we know neither), plus our ``metrics_url``: the sampler's model
    metrics path (None without a deployment). Two registry reads."""
    model_id, dep_id = trainer.sampler_model_id, trainer.sampler_deployment_id
    if not model_id:
        return None
    model = registry.tenancy.model(model_id, trainer.organization_id)
    dep = registry.deployments.deployment(model_id, dep_id) if dep_id else None
    created_ms = dep.created_at_ms if dep else model.created_at_ms if model else trainer.created_at_ms
    return {
        "id": dep_id or model_id,
        "base_url": "",
        "base_model": "",
        "created_at": iso_ms(created_ms),
        "model_id": model_id,
        "deployment_id": dep_id,
        "status": {"name": dep.status if dep else UNKNOWN_STATUS},
        "user": NO_USER,
        "instance_type": instance_type_v1(dep),
        "metrics_url": f"/v1/models/{model_id}/deployments/{dep_id}/metrics" if dep_id else None,
    }


def trainer_v1(registry: Registry, trainer: TrainerDeploymentInfo) -> dict[str, Any]:
    """``LoopsDeploymentV1{id, base_model, base_url, status, user, created_at, instance_type, node_count,
    sampler}`` plus ``{name, metrics_url, nodes: [{node_id, role, gpu_ranks, pod, namespace, targets}]}``
    (nodes leader first, target URLs redacted). ``base_model`` and ``base_url`` are "" (we know neither),
    ``status`` ``{"name": TRAINER_STATUS}``, ``user`` ``NO_USER``; ``active_run_id``, ``latest_run_id``
    and ``availability_model`` are left out (we know no runs nor capacity)."""
    return {
        "id": trainer.id,
        "name": trainer.name,
        "base_model": "",
        "base_url": "",
        "status": {"name": TRAINER_STATUS},
        "user": NO_USER,
        "created_at": iso_ms(trainer.created_at_ms),
        "instance_type": _trainer_instance_type(trainer),
        "node_count": len(trainer.nodes),
        "sampler": sampler_v1(registry, trainer),
        "metrics_url": f"/v1/loops/deployments/{trainer.id}/metrics",
        "nodes": [_node_v1(n) for n in trainer.nodes],
    }
