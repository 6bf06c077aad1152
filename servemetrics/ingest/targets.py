"""Scrape targets from the registry's records: replica targets with their registry labels
(``labels.target_labels``) and trainer node targets (``deployment_id`` = the trainer deployment,
``node_id`` = the node; docs/loops.md).

The registry's records come in as any objects with the fields below (``registry.TargetInfo`` and
``registry.TrainerTargetInfo``), so ingest does not import the registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from servemetrics.ingest.scraper import Target
from servemetrics.labels import TARGET_LABELS, target_labels

__all__ = ["ReplicaTargetRecord", "TrainerTargetRecord", "targets_from_registry"]


class ReplicaTargetRecord(Protocol):
    """The fields of a replica target record (``registry.TargetInfo``)."""

    @property
    def url(self) -> str: ...
    @property
    def model_id(self) -> str: ...
    @property
    def model_name(self) -> str: ...
    @property
    def deployment_id(self) -> str: ...
    @property
    def replica(self) -> str: ...
    @property
    def environment(self) -> str | None: ...
    @property
    def rollout_phase(self) -> str | None: ...


class TrainerTargetRecord(Protocol):
    """The fields of a trainer node target record (``registry.TrainerTargetInfo``)."""

    @property
    def url(self) -> str: ...
    @property
    def trainer_deployment_id(self) -> str: ...
    @property
    def node_id(self) -> str: ...


def replica_labels(t: ReplicaTargetRecord) -> dict[str, str]:
    """The registry labels the scraper attaches to a replica target's samples, ``""`` where none, in
    ``TARGET_LABELS`` order (the order service discovery answers them in)."""
    labels = dict(
        target_labels(t.model_id, t.model_name, t.deployment_id, t.replica, t.environment, t.rollout_phase)
    )
    return {name: labels[name] for name in TARGET_LABELS}


def targets_from_registry(
    replicas: Iterable[ReplicaTargetRecord],
    trainers: Iterable[TrainerTargetRecord],
    extra: Iterable[Target] = (),
) -> list[Target]:
    """``extra`` first, then one ``Target`` per replica target and per trainer node target."""
    out = list(extra)
    for t in replicas:
        out.append(
            Target(
                t.url,
                target_labels(
                    t.model_id, t.model_name, t.deployment_id, t.replica, t.environment, t.rollout_phase
                ),
            )
        )
    for tt in trainers:
        out.append(Target(tt.url, (("deployment_id", tt.trainer_deployment_id), ("node_id", tt.node_id))))
    return out
