"""``GET /v1/service_discovery/targets``: the registry's scrape targets as Prometheus HTTP SD JSON.

For scaling out (issue 6): a Prometheus agent or vmagent with ``http_sd_configs`` pointing here scrapes the
caller organization's replicas and trainer nodes itself, with the labels our own scraper attaches
(``ingest/targets.py``): ``model_id``, ``model_name``, ``deployment_id``, ``replica``, ``environment``,
``rollout_phase`` for a replica; ``deployment_id`` (the trainer's id) and ``node_id`` for a trainer node.
Format (Prometheus docs, "Writing HTTP Service Discovery"): a JSON list of ``{"targets": ["host:port"],
"labels": {...}}``, 200 with ``[]`` when there is nothing to scrape. Each URL becomes ``__address__``
(``host:port``, the scheme's default port when the URL has none), ``__scheme__``, ``__metrics_path__``
and one ``__param_<name>`` per query parameter (the first value when repeated); credentials in a URL are
never passed on. A trainer's ``kubelet_summary`` targets are left out: the kubelet Summary API answers
JSON, which an agent cannot scrape. docs/service-discovery.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Request

from servemetrics.api.deps import Auth, RegistryDep, require_org_metrics_read
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.routes.loops import trainer_visible
from servemetrics.ingest.targets import replica_labels
from servemetrics.registry import KeyInfo, Registry, TargetInfo, can_read_metrics

router = APIRouter(tags=["service discovery"])
DEFAULT_PORTS = {"http": 80, "https": 443}
AGENT_UNSCRAPABLE_KINDS = frozenset({"kubelet_summary"})
"""Trainer target kinds left out of the answer: their body is not Prometheus text (Summary API JSON)."""


def sd_group(url_text: str, registry_labels: Mapping[str, str]) -> dict[str, Any]:
    """One HTTP SD target group for the target URL ``url_text``: ``{"targets": ["host:port"], "labels":
    {"__metrics_path__", "__scheme__", **registry_labels, "__param_<name>"...}}``; the URL's user and
    password are dropped.

    Raises ValueError for a URL without a host (the registry accepts only http(s) URLs with a host).
    """
    url = urlsplit(url_text)
    if not url.hostname:
        raise ValueError("target URL has no host")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    port = url.port or DEFAULT_PORTS.get(url.scheme, 80)
    labels = {"__metrics_path__": url.path or "/", "__scheme__": url.scheme or "http", **registry_labels}
    for name, value in parse_qsl(url.query, keep_blank_values=True):
        labels.setdefault(f"__param_{name}", value)
    return {"targets": [f"{host}:{port}"], "labels": labels}


def organization_targets(registry: Registry, key: KeyInfo) -> list[TargetInfo]:
    """Targets (replicas STARTING or ACTIVE) of the models of the key's organization it may read."""
    readable = {
        m.id for m in registry.tenancy.list_models(key.organization_id) if can_read_metrics(key, m.id)
    }
    return [t for t in registry.list_targets() if t.model_id in readable]


def trainer_targets(registry: Registry, key: KeyInfo) -> list[tuple[str, dict[str, str]]]:
    """``(url, labels)`` of every target of every trainer node of the key's organization that the key
    sees (a scoped key: trainers whose sampler model is in scope), by trainer id then node (leader first)
    then target as declared; ``kubelet_summary`` targets left out. Labels as our scraper attaches:
    ``deployment_id`` = the trainer's id, ``node_id``."""
    out = []
    for trainer in registry.trainers.list_trainer_deployments(key.organization_id):
        if not trainer_visible(key, trainer):
            continue
        for node in trainer.nodes:
            for target in node.targets:
                if target.kind not in AGENT_UNSCRAPABLE_KINDS:
                    out.append((target.url, {"deployment_id": trainer.id, "node_id": node.node_id}))
    return out


@router.get("/v1/service_discovery/targets")
def service_discovery_targets(request: Request, registry: RegistryDep, key: Auth) -> list[dict[str, Any]]:
    """Prometheus HTTP SD JSON of the caller's organization (a scoped export key: its models and the
    trainers whose sampler is one of them): replicas ordered by model, deployment, replica, URL, then
    trainer nodes' targets. 403 for keys that may not read metrics, 400 for any query parameter."""
    require_org_metrics_read(key, "scrape targets")
    reject_unknown_params(request, ())
    wanted = [(t.url, replica_labels(t)) for t in organization_targets(registry, key)]
    out = []
    for url, labels in [*wanted, *trainer_targets(registry, key)]:
        try:
            out.append(sd_group(url, labels))
        except ValueError:
            continue  # not scrapable by an agent either; our own scraper reports it as down
    return out
