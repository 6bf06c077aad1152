"""``GET /v1/service_discovery/targets``: the registry's scrape targets as Prometheus HTTP SD JSON.

For scaling out (issue 6): a Prometheus agent or vmagent with ``http_sd_configs`` pointing here scrapes the
caller organization's replicas itself, with the labels our own scraper attaches (``model_id``,
``model_name``, ``deployment_id``, ``replica``, ``environment``, ``rollout_phase``; ``api/app.py``).
Format (Prometheus docs, "Writing HTTP Service Discovery"): a JSON list of ``{"targets": ["host:port"],
"labels": {...}}``, 200 with ``[]`` when there is nothing to scrape. Each URL becomes ``__address__``
(``host:port``, the scheme's default port when the URL has none), ``__scheme__``, ``__metrics_path__``
and one ``__param_<name>`` per query parameter (the first value when repeated). docs/service-discovery.md.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter

from servemetrics.api.deps import Auth, RegistryDep
from servemetrics.api.errors import forbidden
from servemetrics.registry import KeyInfo, Registry, TargetInfo, can_read_metrics

router = APIRouter(tags=["service discovery"])
DEFAULT_PORTS = {"http": 80, "https": 443}
READ_KEY_TYPES = ("WORKSPACE_EXPORT_METRICS", "WORKSPACE_MANAGE_ALL", "PERSONAL")


def target_labels(t: TargetInfo) -> dict[str, str]:
    """The labels our scraper attaches to a target's samples (``app._targets``), "" where none."""
    return {
        "model_id": t.model_id,
        "model_name": t.model_name,
        "deployment_id": t.deployment_id,
        "replica": t.replica,
        "environment": t.environment or "",
        "rollout_phase": t.rollout_phase or "",
    }


def sd_group(t: TargetInfo) -> dict[str, Any]:
    """One HTTP SD target group for ``t``: ``{"targets": ["host:port"], "labels": {...}}``.

    Raises ValueError for a URL without a host (the registry accepts only http(s) URLs with a host).
    """
    url = urlsplit(t.url)
    if not url.hostname:
        raise ValueError(f"target URL {t.url!r} has no host")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    port = url.port or DEFAULT_PORTS.get(url.scheme, 80)
    labels = {"__metrics_path__": url.path or "/", "__scheme__": url.scheme or "http", **target_labels(t)}
    for name, value in parse_qsl(url.query, keep_blank_values=True):
        labels.setdefault(f"__param_{name}", value)
    return {"targets": [f"{host}:{port}"], "labels": labels}


def organization_targets(registry: Registry, key: KeyInfo) -> list[TargetInfo]:
    """Targets (replicas STARTING or ACTIVE) of the models of the key's organization it may read."""
    readable = {m.id for m in registry.list_models(key.organization_id) if can_read_metrics(key, m.id)}
    return [t for t in registry.list_targets() if t.model_id in readable]


@router.get("/v1/service_discovery/targets")
def service_discovery_targets(registry: RegistryDep, key: Auth) -> list[dict[str, Any]]:
    """Prometheus HTTP SD JSON of the caller's organization (a scoped export key: its models only);
    ordered by model, deployment, replica, URL; keys that may not read metrics get 403."""
    if key.type not in READ_KEY_TYPES:
        raise forbidden(
            f"a {key.type} key cannot read scrape targets; use a WORKSPACE_EXPORT_METRICS, "
            "WORKSPACE_MANAGE_ALL or PERSONAL key"
        )
    out = []
    for t in organization_targets(registry, key):
        try:
            out.append(sd_group(t))
        except ValueError:
            continue  # not scrapable by an agent either; our own scraper reports it as down
    return out
