"""``create_app(config)``: the FastAPI application over a running ``Service`` (``api/service.py``).

The lifespan is ``open_service``: it opens the registry, the store, the gateway, the scraper and the
loops, and keeps the ``Service`` in ``app.state.service``, where ``api/deps.py`` takes its parts from.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI

from servemetrics import __version__
from servemetrics.api.bodyguard import BODY_LIMITS, BodyGuard, BodyLimits
from servemetrics.api.errors import install_error_handlers
from servemetrics.api.routes import (
    catalog,
    dashboard,
    discovery,
    engines,
    environments,
    events,
    export,
    ingest,
    inventory,
    loops,
    management,
    metrics,
    model_api_usage,
    model_apis,
    organization,
    queued,
    startups,
)
from servemetrics.api.routes import gateway as gateway_routes
from servemetrics.api.service import open_service
from servemetrics.config import Config
from servemetrics.gateway import GatewayOptions
from servemetrics.gateway.queued import QueuedOptions
from servemetrics.store import Store
from servemetrics.timeutil import wall_clock_ms

ROUTERS = (
    *(metrics, management, environments, events, inventory, ingest, export, catalog, organization),
    *(loops, dashboard, discovery, engines, startups, model_api_usage, model_apis),
)
"""Route modules in the order their routes are matched and listed in ``/docs``."""


def create_app(
    config: Config,
    *,
    scrape: bool = True,
    clock: Callable[[], int] = wall_clock_ms,
    store: Store | None = None,
    gateway: bool = True,
    gateway_options: GatewayOptions | None = None,
    queued_options: QueuedOptions | None = None,
) -> FastAPI:
    """Build the service for ``config``; the arguments are ``open_service``'s (``gateway`` also mounts
    the inference paths and ``/gateway/metrics``)."""
    service = functools.partial(
        open_service,
        config,
        scrape=scrape,
        clock=clock,
        store=store,
        gateway=gateway,
        gateway_options=gateway_options,
        queued_options=queued_options,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with service() as app.state.service:
            yield

    app = FastAPI(
        title="servemetrics",
        version=__version__,
        lifespan=lifespan,
        description="Model-serving metrics: the model metrics API, management API, ingest and export.",
    )
    install_error_handlers(app)
    for module in ROUTERS:
        app.include_router(module.router)
    if gateway:
        app.include_router(gateway_routes.router)
        app.include_router(queued.router)
        app.add_middleware(gateway_routes.InferenceRouter)
    limits = BodyLimits(**config.limits.model_dump(include=set(BODY_LIMITS)))
    app.add_middleware(BodyGuard, limits=limits)  # outermost
    return app
