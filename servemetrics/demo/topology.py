"""What the demo runs and the service config it generates for it.

One organization (``demo``) with one ``WORKSPACE_MANAGE_ALL`` key, model ``demo-model`` with deployments
``d1`` (small model, 10 ms per token) and ``d2`` (larger model, 25 ms per token), two replicas each. Every
replica has three targets: its own ``/metrics`` first (the gateway serves from the first target), then its
path on ``dcgm-replay`` and on ``vllm-replay``. Environment ``production`` is promoted to ``d1`` at start.
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


@dataclass(frozen=True)
class ReplicaSpec:
    """A replica process: id, deployment, port, model size and per-token delay."""

    id: str
    deployment: str
    port: int
    size: str
    token_ms: float

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Topology:
    """Ports and replicas of one demo run."""

    port: int
    replicas: tuple[ReplicaSpec, ...]
    dcgm_port: int
    vllm_port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def deployments(self) -> list[str]:
        return sorted({r.deployment for r in self.replicas})

    def targets(self, replica: ReplicaSpec) -> list[str]:
        return [
            f"{replica.url}/metrics",
            f"http://127.0.0.1:{self.dcgm_port}/{replica.id}/metrics",
            f"http://127.0.0.1:{self.vllm_port}/{replica.id}/metrics",
        ]


def make_topology(port: int, ports: list[int]) -> Topology:
    """Two deployments of two replicas on ``ports[0:4]``; the replays on ``ports[4:6]``."""
    kinds = {"d1": ("small", 10.0), "d2": ("large", 25.0)}
    replicas = tuple(
        ReplicaSpec(f"{dep}-r{i + 1}", dep, ports[2 * d + i], *kinds[dep])
        for d, dep in enumerate(("d1", "d2"))
        for i in range(2)
    )
    return Topology(port, replicas, ports[4], ports[5])


def service_config(
    topo: Topology, data_dir: Path, api_key: str, scrape_interval: str = "5s"
) -> dict[str, Any]:
    """The ``servemetrics serve`` config of the demo (production promoted to d1 now)."""
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    sizes = {"d1": "small model, 10 ms/token", "d2": "larger model, 25 ms/token"}
    return {
        "listen": f"127.0.0.1:{topo.port}",
        "data_dir": str(data_dir),
        "scrape_interval": scrape_interval,
        "scrape_timeout": "2s",
        "organizations": [
            {"name": ORGANIZATION, "api_keys": [{"key": api_key, "type": "WORKSPACE_MANAGE_ALL"}]}
        ],
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
    }


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
