"""``create_app(config)``: the FastAPI application and the wiring of registry, store and scraper.

Wiring happens here and in ``cli.py`` only (STYLE: config is read at the edge and passed down).
The lifespan opens the registry (applying the YAML's static declarations), the sample store, starts the
scraper over the registry's targets (refreshed every ``TARGET_REFRESH_S``) and the retention loop, and
the gateway (docs/gateway.md), whose ``/gateway/metrics`` the scraper reads like any target.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from fastapi import FastAPI

from servemetrics import __version__
from servemetrics.api.errors import install_error_handlers
from servemetrics.api.routes import (
    catalog,
    dashboard,
    discovery,
    export,
    ingest,
    inventory,
    loops,
    management,
    metrics,
    organization,
    queued,
)
from servemetrics.api.routes import gateway as gateway_routes
from servemetrics.config import Config, apply_config, engine_options
from servemetrics.gateway import Gateway, GatewayOptions
from servemetrics.gateway.queued import QueuedOptions, QueuedRequests
from servemetrics.gateway.queued_store import QueuedStore
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.ingest.targets import targets_from_registry
from servemetrics.registry import Registry
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store import Store
from servemetrics.timeutil import wall_clock_ms

log = logging.getLogger(__name__)
TARGET_REFRESH_S = 30.0
RETENTION_EVERY_S = 3600.0


@dataclass
class Service:
    """What a running app holds (``app.state.service``)."""

    config: Config
    registry: Registry
    store: Store
    metrics: SelfMetrics
    clock: Callable[[], int]
    scraper: Scraper | None = None
    gateway: Gateway | None = None
    queued: QueuedRequests | None = None


def gateway_target(config: Config) -> Target:
    """The gateway's ``/gateway/metrics`` on this service's own address, with no registry labels: its
    series carry their own ``model_id``, ``deployment_id``, ``environment`` ... (``adapt`` keeps them)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(config.host, config.host)
    return Target(f"http://{host}:{config.port}/gateway/metrics", ())


def _targets(registry: Registry, extra: tuple[Target, ...] = ()) -> list[Target]:
    return targets_from_registry(registry.list_targets(), registry.list_trainer_targets(), extra)


async def _refresh_targets(service: Service) -> None:
    assert service.scraper is not None
    while True:
        try:
            extra = (gateway_target(service.config),) if service.gateway is not None else ()
            service.scraper.set_targets(await asyncio.to_thread(_targets, service.registry, extra))
        except Exception:
            log.exception("refreshing scrape targets failed; keeping the previous ones")
        await asyncio.sleep(TARGET_REFRESH_S)


async def _retention(service: Service) -> None:
    retention_ms = int(service.config.retention * 1000)
    while True:
        try:
            await asyncio.to_thread(service.store.delete_before, service.clock() - retention_ms)
            if service.queued is not None:
                store = service.queued.store
                await asyncio.to_thread(store.purge_finished, service.clock() - retention_ms)
        except Exception:
            log.exception("applying retention failed; will retry")
        await asyncio.sleep(RETENTION_EVERY_S)


def create_app(
    config: Config,
    *,
    scrape: bool = True,
    clock: Callable[[], int] = wall_clock_ms,
    store: Store | None = None,
    gateway: bool = True,
    gateway_options: GatewayOptions | None = None,
    async_options: QueuedOptions | None = None,
) -> FastAPI:
    """Build the service for ``config``.

    Args:
        config: the loaded YAML configuration.
        scrape: start the scraper (tests of the API alone pass False).
        clock: epoch-ms clock used for "now" (tests pin it).
        store: a store to use instead of the DuckDB file in ``config.data_dir`` (tests).
        gateway: mount the inference paths and ``/gateway/metrics`` and run the gateway.
        gateway_options: the gateway's tunables (default ``GatewayOptions()``).
        async_options: queued (async) requests' tunables (default ``QueuedOptions()``).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
        registry = Registry.open(str(config.registry_url))
        apply_config(config, registry)
        if store is None:
            from servemetrics.store import open_store  # the DuckDB backend loads only when used

            opened: Store = open_store(Path(config.data_dir), engine_options(config))
        else:
            opened = store
        service = Service(config, registry, opened, SelfMetrics(), clock)
        if (rw_stats := getattr(opened, "remote_write_stats", None)) is not None:
            service.metrics.watch_remote_write(rw_stats)  # an engine store: queue, sent, failed, retries
        app.state.service = service
        app.state.registry = registry
        if gateway:
            service.gateway = app.state.gateway = Gateway(
                registry, clock, gateway_options or GatewayOptions()
            )
            service.queued = app.state.queued = QueuedRequests(
                service.gateway, QueuedStore(registry.engine), async_options
            )
            await service.gateway.start()
            await service.queued.start()
        tasks: list[asyncio.Task[None]] = []
        async with httpx.AsyncClient() as client:
            if scrape:
                service.scraper = Scraper(
                    client,
                    service.store.append,
                    config.scrape_interval,
                    config.scrape_timeout,
                    service.metrics,
                )
                tasks.append(asyncio.create_task(_refresh_targets(service)))
            tasks.append(asyncio.create_task(_retention(service)))
            try:
                yield
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if service.scraper is not None:
                    await service.scraper.stop()
                if service.queued is not None:
                    await service.queued.stop()
                if service.gateway is not None:
                    await service.gateway.stop()
                service.store.close()
                registry.close()

    app = FastAPI(
        title="servemetrics",
        version=__version__,
        lifespan=lifespan,
        description="Model-serving metrics: the model metrics API, management API, ingest and export.",
    )
    install_error_handlers(app)
    for module in (metrics, management, inventory, ingest, export, catalog, organization, loops, dashboard):
        app.include_router(module.router)
    app.include_router(discovery.router)  # GET /v1/service_discovery/targets (docs/service-discovery.md)
    if gateway:
        app.include_router(gateway_routes.router)
        app.include_router(queued.router)
        app.add_middleware(gateway_routes.InferenceRouter)
    return app
