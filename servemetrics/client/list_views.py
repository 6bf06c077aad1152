"""Tables of the listing commands: models (``ModelsV1``), environments (``EnvironmentV1``) and events
(docs/management.md). A null prints as ``-``."""

from __future__ import annotations

import json
from datetime import tzinfo
from typing import Any

from servemetrics.client.tables import NO_VALUE, plain_table
from servemetrics.client.window import format_time


def _cell(value: Any) -> str:
    if value is None or value == "":
        return NO_VALUE
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def models_table(answer: dict[str, Any]) -> str:
    """ID, NAME, PRODUCTION and DEVELOPMENT (deployment ids), DEPLOYMENTS (count), INSTANCE TYPE."""
    fields = (
        "id",
        "name",
        "production_deployment_id",
        "development_deployment_id",
        "deployments_count",
        "instance_type_name",
    )
    rows = [[_cell(m.get(f)) for f in fields] for m in answer["models"]]
    headers = ["ID", "NAME", "PRODUCTION", "DEVELOPMENT", "DEPLOYMENTS", "INSTANCE TYPE"]
    return plain_table(headers, rows)


def _promotion(env: dict[str, Any]) -> str:
    p = env.get("in_progress_promotion")
    if not p:
        return NO_VALUE
    percent = p.get("percent_traffic_to_new_version")
    return p["status"] if percent is None else f"{p['status']} {percent}%"


def environments_table(answer: dict[str, Any]) -> str:
    """NAME, ACTIVE (yes / no), CURRENT and CANDIDATE (deployment ids), PROMOTION (status and the
    percent of traffic on the new deployment), INSTANCE TYPE."""
    rows = [
        [
            e["name"],
            "yes" if e.get("is_active", True) else "no",
            _cell((e.get("current_deployment") or {}).get("id")),
            _cell((e.get("candidate_deployment") or {}).get("id")),
            _promotion(e),
            _cell((e.get("instance_type") or {}).get("name")),
        ]
        for e in answer["environments"]
    ]
    return plain_table(["NAME", "ACTIVE", "CURRENT", "CANDIDATE", "PROMOTION", "INSTANCE TYPE"], rows)


def change(details: dict[str, Any]) -> str:
    """An event's ``old`` → ``new``: the fields that differ (``max_replica: 1 → 4``), or every field of
    ``new`` when there was nothing before (``gpu_type=H100``), joined by ``; ``."""
    old, new = details.get("old"), details.get("new")
    if not isinstance(new, dict):
        return ""
    if not isinstance(old, dict):
        return "; ".join(f"{k}={_cell(v)}" for k, v in new.items())
    keys = [k for k in {**old, **new} if old.get(k) != new.get(k)]
    return "; ".join(f"{k}: {_cell(old.get(k))} → {_cell(new.get(k))}" for k in keys)


def events_table(answer: dict[str, Any], tz: tzinfo | None) -> str:
    """TIME (in ``tz``, None: local), KIND, DEPLOYMENT, ENVIRONMENT, CHANGE (``change``), oldest first."""
    rows = [
        [
            format_time(e["epoch_millis"], tz),
            e["kind"],
            _cell(e.get("deployment_id")),
            _cell(e.get("environment")),
            change(e.get("details") or {}),
        ]
        for e in answer["events"]
    ]
    return plain_table(["TIME", "KIND", "DEPLOYMENT", "ENVIRONMENT", "CHANGE"], rows)
