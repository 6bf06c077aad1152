"""What the demo runs and the service config it generates for it.

One organization (``demo``) with one ``WORKSPACE_MANAGE_ALL`` key, model ``demo-model`` with deployments
``d1`` (small model, 10 ms per token, vLLM-format engine metrics) and ``d2`` (larger model, 25 ms per
token, SGLang format), two replicas each. Every replica has two targets: its own ``/metrics`` first (the
gateway serves from the first target), then its path on ``dcgm-replay``. Environment ``production`` is
promoted to ``d1`` at start.

The trainer (Loops) deployment ``demo-trainer`` (sampler: ``demo-model`` / ``d1``) has two nodes,
``leader-0`` and ``worker-1``, with GPU ranks 0 and 1; both are served by one trainer process
(``demo/trainer.py``): the leader's request metrics at ``/metrics``, each node's replayed DCGM, kubelet
and Summary API under ``/nodes/<node>/``. Each node's kubelet series are its pod's (``pod_a``, ``pod_b``
of the kubelet fixture).

The Model API ``demo-chat`` is served by ``production`` (so it follows the promotion) and called by two
teams of the organization, ``research`` and ``support``, each with its own ``WORKSPACE_INVOKE`` key
and its own limits (``TEAM_LIMITS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

MODEL = "demo-model"
ENVIRONMENT = "production"
ORGANIZATION = "demo"
TRAINER = "demo-trainer"
MODEL_API = "demo-chat"
"""The demo's Model API: served by ``production`` of ``demo-model`` (its replicas' OpenAI routes)."""
TEAM_LIMITS: dict[str, dict[str, int]] = {
    "research": {"requests_per_minute": 300, "tokens_per_minute": 100_000},
    "support": {"requests_per_minute": 12},
}
"""Per team, its rate limits on ``MODEL_API``: research's are far above what it sends (1 call a second
by default, about 12,000 tokens a minute), support's 12 calls a minute are a fifth of it, so support
runs into its limit once its bucket of 12 is spent (about 15 s) and most of its calls get a 429."""
TRAINER_NODES: tuple[tuple[str, str, str, str], ...] = (
    ("leader-0", "leader", "namespace_a", "pod_a"),
    ("worker-1", "worker", "namespace_b", "pod_b"),
)
"""``(node id, role, namespace, pod)`` of the demo trainer's nodes."""


@dataclass(frozen=True)
class ReplicaSpec:
    """A replica process: id, deployment, port, model size, per-token delay and engine metrics format."""

    id: str
    deployment: str
    port: int
    size: str
    token_ms: float
    engine: str = "vllm"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Topology:
    """Ports and replicas of one demo run."""

    port: int
    replicas: tuple[ReplicaSpec, ...]
    dcgm_port: int
    trainer_port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def deployments(self) -> list[str]:
        return sorted({r.deployment for r in self.replicas})

    @property
    def trainer_url(self) -> str:
        return f"http://127.0.0.1:{self.trainer_port}"

    def trainer_node_args(self) -> list[str]:
        """``--node`` arguments of the trainer process."""
        return [a for node, _, ns, pod in TRAINER_NODES for a in ("--node", f"{node}={ns}/{pod}")]

    def loops_config(self) -> list[dict[str, Any]]:
        """The ``loops`` section: the trainer, its two nodes and their targets."""
        nodes = []
        for node, role, namespace, pod in TRAINER_NODES:
            base = f"{self.trainer_url}/nodes/{node}"
            targets = [
                {"url": f"{base}/dcgm/metrics", "kind": "dcgm"},
                {"url": f"{base}/kubelet/metrics", "kind": "kubelet"},
                {"url": f"{base}/stats/summary", "kind": "kubelet_summary"},
            ]
            if role == "leader":
                targets.append({"url": f"{self.trainer_url}/metrics", "kind": "requests"})
            nodes.append(
                {
                    "id": node,
                    "role": role,
                    "gpu_ranks": [0, 1],
                    "pod": pod,
                    "namespace": namespace,
                    "targets": targets,
                }
            )
        sampler = {"model": MODEL, "deployment": "d1"}
        return [
            {
                "id": TRAINER,
                "name": "demo trainer (SGD)",
                "organization": ORGANIZATION,
                "sampler": sampler,
                "nodes": nodes,
            }
        ]

    def replay_args(self) -> list[str]:
        """``dcgm-replay``'s arguments: its port, and each replica's ``/busy`` (its GPU's utilisation)."""
        busy = [a for r in self.replicas for a in ("--busy", f"{r.id}={r.url}/busy")]
        return ["--kind", "dcgm", "--port", str(self.dcgm_port), *busy]

    def targets(self, replica: ReplicaSpec) -> list[str]:
        return [
            f"{replica.url}/metrics",
            f"http://127.0.0.1:{self.dcgm_port}/{replica.id}/metrics",
        ]


def make_topology(port: int, ports: list[int]) -> Topology:
    """Two deployments of two replicas on ``ports[0:4]``; the DCGM replay on ``ports[4]``; the trainer on
    ``ports[5]`` when given."""
    kinds = {"d1": ("small", 10.0, "vllm"), "d2": ("large", 25.0, "sglang")}
    replicas = tuple(
        ReplicaSpec(f"{dep}-r{i + 1}", dep, ports[2 * d + i], *kinds[dep])
        for d, dep in enumerate(("d1", "d2"))
        for i in range(2)
    )
    return Topology(port, replicas, ports[4], ports[5] if len(ports) > 5 else 0)


def service_config(
    topo: Topology,
    data_dir: Path,
    api_key: str,
    scrape_interval: str = "5s",
    team_keys: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``servemetrics serve`` config of the demo (production promoted to d1 now; webhooks may reach
    127.0.0.1, where the demo's receiver listens); with ``team_keys`` (team id -> key, the teams of
    ``TEAM_LIMITS``) also the teams, their keys and the Model API ``demo-chat``."""
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    sizes = {
        "d1": "small model, 10 ms/token, vLLM metrics",
        "d2": "larger model, 25 ms/token, SGLang metrics",
    }
    return {
        "listen": f"127.0.0.1:{topo.port}",
        "data_dir": str(data_dir),
        "scrape_interval": scrape_interval,
        "scrape_timeout": "2s",
        "organizations": [_organization(api_key, team_keys or {})],
        "models": [
            {
                "id": MODEL,
                "name": "demo char-level LM",
                "organization": ORGANIZATION,
                "deployments": [
                    {
                        "id": dep,
                        "name": sizes[dep],
                        "instance_type": {"gpu_type": "RTX4000ADA", "gpu_count": 1},
                        "replicas": [
                            {"id": r.id, "targets": topo.targets(r)}
                            for r in topo.replicas
                            if r.deployment == dep
                        ],
                    }
                    for dep in topo.deployments()
                ],
                "environments": [{"name": ENVIRONMENT, "promotions": [{"deployment": "d1", "at": now}]}],
            }
        ],
        **({"loops": topo.loops_config()} if topo.trainer_port else {}),
        **({"model_apis": [_model_api()]} if team_keys else {}),
        # the demo's webhook receiver (demo/load.py) listens on loopback, which webhooks may not reach
        # unless the operator allows it; the replicas are declared above, so they are trusted
        "network": {"webhooks_allow": ["127.0.0.1"]},
    }


def _organization(api_key: str, team_keys: dict[str, str]) -> dict[str, Any]:
    keys = [{"key": api_key, "type": "WORKSPACE_MANAGE_ALL"}]
    keys += [
        {"key": key, "type": "WORKSPACE_INVOKE", "team": team, "name": f"{team} team"}
        for team, key in team_keys.items()
    ]
    org: dict[str, Any] = {"name": ORGANIZATION, "api_keys": keys}
    if team_keys:
        org["teams"] = [{"id": team, "name": team.capitalize()} for team in team_keys]
    return org


def _model_api() -> dict[str, Any]:
    return {
        "name": MODEL_API,
        "organization": ORGANIZATION,
        "model": MODEL,
        "environment": ENVIRONMENT,
        "display_name": "demo chat (character-level LM)",
        "description": "The demo's language model through its replicas' OpenAI routes",
        "context_length": 32768,
        "team_limits": TEAM_LIMITS,
    }


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
