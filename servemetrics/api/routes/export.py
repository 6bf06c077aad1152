"""The export endpoint ``GET /metrics`` (platform-facts §2), the service's own ``GET /service/metrics``
and the liveness probe ``GET /healthz`` (docs/export.md).

``/metrics`` answers the caller's organization's canonical series (``api/export_snapshot.py``) to a
``WORKSPACE_EXPORT_METRICS`` (its ``model_ids`` only, when it has them), ``WORKSPACE_MANAGE_ALL`` or
``PERSONAL`` key; 401 without a key, 403 for another key type, 429 over 6 requests per minute per
organization (``api/export_limit.py``). ``/service/metrics`` needs no key and holds no tenant data
(``selfmetrics.TENANT_LABELS`` are summed away).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder

from servemetrics.api.deps import Auth, ServiceDep, require_org_metrics_read
from servemetrics.api.export_snapshot import Snapshot, build_snapshot
from servemetrics.api.export_view import ExportCollector
from servemetrics.api.service import Service
from servemetrics.registry import team_bound

router = APIRouter(tags=["service"])
SERVICE_METRICS_PATH = "/service/metrics"
"""Where the service's own metrics are served (no key; tenant-free)."""


def organization_snapshot(service: Service, organization_id: int, now_ms: int) -> Snapshot:
    """The export of every model of the organization at ``now_ms`` (epoch ms), from the store."""
    registry = service.registry
    deployments = {
        model.id: frozenset(d.id for d in registry.deployments.list_deployments(model.id))
        for model in registry.tenancy.list_models(organization_id)
    }
    return build_snapshot(service.store, deployments, now_ms)


@router.get(
    "/metrics",
    tags=["export"],
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
)
def export_metrics(
    service: ServiceDep, key: Auth, accept: Annotated[str | None, Header(include_in_schema=False)] = None
) -> Response:
    """The organization's series for a Prometheus scrape (OpenMetrics when ``Accept`` asks for
    ``application/openmetrics-text``), refreshed at most every 30 s; 6 requests per minute per
    organization, then 429 with ``Retry-After``."""
    require_org_metrics_read(key, "the metrics export")
    service.export_limit.admit(key.organization_id)
    org = key.organization_id
    snapshot = service.exports.get(org, lambda now_ms: organization_snapshot(service, org, now_ms))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ExportCollector(snapshot, key.model_ids, team_bound(key)))
    encoder, content_type = choose_encoder(accept or "")
    return Response(encoder(registry), media_type=content_type)


@router.get(SERVICE_METRICS_PATH, include_in_schema=False)
def service_metrics(service: ServiceDep) -> Response:
    """Scrapes, samples appended, query latency, ingest and store gauges, without tenant labels."""
    return Response(generate_latest(service.metrics.public), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}
