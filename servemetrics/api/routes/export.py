"""The service's own ``/metrics`` (Prometheus text format) and a liveness probe ``/healthz``."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from servemetrics.api.deps import ServiceDep

router = APIRouter(tags=["service"])


@router.get("/metrics", include_in_schema=False)
def own_metrics(service: ServiceDep) -> Response:
    """Scrape durations, samples appended and query latency, plus store size gauges."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}
