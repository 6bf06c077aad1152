"""The label contract, named once: which labels the registry attaches to scraped series, which of them a
promotion changes, and the name of the scrape-health series.

Every layer that reads or writes these labels imports them from here (the scraper and the adapters at
ingest, the gateway's own series, the query layer's cross-series math, service discovery).
"""

from __future__ import annotations

from servemetrics.types import Labels, labels_of

__all__ = ["CUSTOM_SOURCE", "DEPLOYMENT_LABELS", "PHASE_LABELS", "TARGET_LABELS", "UP", "target_labels"]

TARGET_LABELS: tuple[str, ...] = (
    "model_id",
    "model_name",
    "deployment_id",
    "replica",
    "environment",
    "rollout_phase",
)
"""Labels attached from the registry to a replica target's samples (they override same-named source ones)."""

DEPLOYMENT_LABELS: tuple[str, ...] = (
    "model_id",
    "model_name",
    "deployment_id",
    "environment",
    "rollout_phase",
)
"""The registry labels of a deployment (``TARGET_LABELS`` without ``replica``): the gateway's own series."""

PHASE_LABELS: tuple[str, ...] = ("environment", "rollout_phase")
"""Labels a promotion changes on a live series (so they are not part of a counter's identity)."""

UP = "up"
"""The per-target scrape-health series (1 after a successful scrape, 0 after a failed one)."""

CUSTOM_SOURCE = "custom"
"""The ``source`` label of a custom metric's series: a replica's own series that no adapter maps, stored
under its own name (``ingest.adapters.custom``) and answered by that name (``query.custom``)."""


def target_labels(
    model_id: str,
    model_name: str,
    deployment_id: str,
    replica: str,
    environment: str | None,
    rollout_phase: str | None,
) -> Labels:
    """The registry ``Labels`` of one replica target, ``""`` for an environment or phase it has none of."""
    return labels_of(
        {
            "model_id": model_id,
            "model_name": model_name,
            "deployment_id": deployment_id,
            "replica": replica,
            "environment": environment or "",
            "rollout_phase": rollout_phase or "",
        }
    )
