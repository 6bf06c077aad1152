"""``open_service(config, …)``: the running service's parts, opened in order and closed in reverse.

Wiring happens here, in ``api/app.py`` and in ``cli.py`` only (STYLE: config is read at the edge and
passed down). ``open_service`` opens the registry (applying the YAML's static declarations), the sample
store and the service's own metrics, starts the gateway (docs/gateway.md), whose ``/gateway/metrics`` the
scraper reads like any target, the scraper over the registry's targets (refreshed every
``TARGET_REFRESH_S``) and the retention loop. Leaving the ``async with`` stops them in the reverse order.
It needs no FastAPI: ``create_app`` only keeps the ``Service`` in ``app.state.service``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from anyio import CapacityLimiter

from servemetrics.api.auth_limit import FailedAuthLimiter, unlimited
from servemetrics.api.ingest_pool import IngestPool
from servemetrics.api.series_limit import ActiveSeries
from servemetrics.config import Config, apply_config, egress_of, engine_options, key_pepper
from servemetrics.gateway import Gateway, GatewayOptions
from servemetrics.gateway.queued import QueuedOptions, QueuedRequests
from servemetrics.gateway.queued_store import QueuedStore
from servemetrics.ingest.scrape_limits import ScrapeLimits
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.ingest.targets import targets_from_registry
from servemetrics.netpolicy import Egress, guarded_client
from servemetrics.query.engines import EngineCache
from servemetrics.registry import Registry
from servemetrics.samples import SampleBatch
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store import Store, open_store
from servemetrics.store.base import SelfMonitored
from servemetrics.timeutil import wall_clock_ms

log = logging.getLogger(__name__)
TARGET_REFRESH_S = 30.0
RETENTION_EVERY_S = 3600.0
Clock = Callable[[], int]
"""Epoch-ms clock: "now" for every query default and for retention (tests pin it)."""
Loop = Coroutine[Any, Any, None]


@dataclass
class Service:
    """What a running service holds (``app.state.service``; routes take its parts from ``api/deps.py``).

    Attributes:
        config: the loaded YAML configuration.
        registry: models, deployments, environments, keys and events.
        store: the sample store.
        metrics: the service's own ``/metrics``.
        clock: epoch-ms "now".
        scraper: the scraper, None when scraping is off.
        gateway: the metering proxy, None when the gateway is off.
        queued: queued (async) requests through the gateway, None when the gateway is off.
        egress: the network policies of tenant-supplied URLs (``config.egress_of``).
        auth_limiter: failed-authentication limiting per client address (``auth_rate_limit``; by
            default none).
        series_limit: active series per organization (``limits.series_per_organization``; by default
            none): every ingest path passes its batches through ``series_limit.admit``.
        ingest: the worker threads and queue of pushed bodies (config ``ingest``).
        engines: engine detection per model, cached (``query.engines``; ``GET .../engines``).
    """

    config: Config
    registry: Registry
    store: Store
    metrics: SelfMetrics
    clock: Clock
    scraper: Scraper | None = None
    gateway: Gateway | None = None
    queued: QueuedRequests | None = None
    egress: Egress | None = None
    auth_limiter: FailedAuthLimiter = field(default_factory=unlimited)
    series_limit: ActiveSeries = field(default_factory=lambda: ActiveSeries(0, lambda _: None, wall_clock_ms))
    ingest: IngestPool = field(default_factory=lambda: IngestPool(2, 4, 5.0))
    engines: EngineCache = field(default_factory=EngineCache)

    def append(self, batch: SampleBatch) -> int:
        """Store ``batch`` without the series the active-series limit refuses; the samples stored."""
        return self.store.append(self.series_limit.admit(batch))


def _org_of(registry: Registry, model_id: str) -> str | None:
    """The organization of model ``model_id``, None when the registry has no such model."""
    model = registry.tenancy.model(model_id, None)
    return None if model is None else model.organization_name


def gateway_target(config: Config) -> Target:
    """The gateway's ``/gateway/metrics`` on this service's own address, with no registry labels: its
    series carry their own ``model_id``, ``deployment_id``, ``environment`` ... (``adapt`` keeps them)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(config.host, config.host)
    return Target(f"http://{host}:{config.port}/gateway/metrics", ())


def scrape_targets(registry: Registry, extra: tuple[Target, ...] = ()) -> list[Target]:
    """Every replica and trainer target of the registry with the labels the scraper attaches, then
    ``extra`` (``ingest.targets.targets_from_registry``)."""
    return targets_from_registry(registry.list_targets(), registry.trainers.list_trainer_targets(), extra)


def _scrape_client(
    egress: Egress, trusted: httpx.AsyncClient, checked: httpx.AsyncClient, target: Target
) -> httpx.AsyncClient:
    """``checked`` for a target the config file does not declare (``Egress.for_target``), else
    ``trusted``; the gateway's own ``/gateway/metrics`` (no ``deployment_id``) is trusted."""
    deployment_id = target.label_dict.get("deployment_id")
    if deployment_id is None or egress.for_target(deployment_id, target.url) is None:
        return trusted
    return checked


async def _refresh_targets(service: Service, scraper: Scraper) -> None:
    while True:
        try:
            extra = (gateway_target(service.config),) if service.gateway is not None else ()
            scraper.set_targets(await asyncio.to_thread(scrape_targets, service.registry, extra))
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


@asynccontextmanager
async def running_gateway(
    registry: Registry,
    clock: Clock,
    options: GatewayOptions | None = None,
    queued_options: QueuedOptions | None = None,
    egress: Egress | None = None,
) -> AsyncIterator[tuple[Gateway, QueuedRequests]]:
    """The gateway over ``registry`` (``GatewayOptions()`` by default; ``egress``: the network policies,
    None: none) and its queued requests, started; stopped at exit (queued requests first)."""
    gateway = Gateway(registry, clock, options or GatewayOptions(), egress)
    queued = QueuedRequests(gateway, QueuedStore(registry.engine), queued_options)
    await gateway.start()
    try:
        await queued.start()
        try:
            yield gateway, queued
        finally:
            await queued.stop()
    finally:
        await gateway.stop()


def _store_for(config: Config, store: Store | None) -> Store:
    """``store``, else the store ``config`` names (the DuckDB file in ``data_dir`` or an engine)."""
    return store if store is not None else open_store(Path(config.data_dir), engine_options(config))


@asynccontextmanager
async def _tasks(*coroutines: Loop) -> AsyncIterator[None]:
    """Run each coroutine as a task; cancel them all (and wait for them) at exit."""
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _scraper(stack: AsyncExitStack, service: Service) -> Scraper:
    """The scraper of ``service`` with its HTTP clients (a trusted one and one the ``egress`` targets
    policy checks), stopped and closed by ``stack``."""
    config, egress = service.config, service.egress
    assert egress is not None
    client = await stack.enter_async_context(httpx.AsyncClient())
    checked = await stack.enter_async_context(guarded_client(egress.targets))
    scraper = Scraper(
        client,
        service.append,
        config.scrape_interval,
        config.scrape_timeout,
        service.metrics,
        client_of=functools.partial(_scrape_client, egress, client, checked),
        limits=ScrapeLimits(**config.scrape_limits()),
        limiter=CapacityLimiter(config.ingest.workers),
    )
    stack.push_async_callback(scraper.stop)
    return scraper


def _limited(service: Service) -> Service:
    """``service`` with the limits its config sets: failed authentications, active series, ingest."""
    config, clock = service.config, service.clock
    limit = config.auth_rate_limit
    service.auth_limiter = FailedAuthLimiter(limit.failures, round(limit.window * 1000), clock)
    service.series_limit = ActiveSeries(
        config.limits.series_per_organization,
        functools.partial(_org_of, service.registry),
        clock,
        service.metrics,
    )
    pushed = config.ingest
    service.ingest = IngestPool(pushed.workers, pushed.queue, pushed.retry_after, service.metrics)
    return service


@asynccontextmanager
async def open_service(
    config: Config,
    *,
    scrape: bool = True,
    clock: Clock = wall_clock_ms,
    store: Store | None = None,
    gateway: bool = True,
    gateway_options: GatewayOptions | None = None,
    queued_options: QueuedOptions | None = None,
) -> AsyncIterator[Service]:
    """The service for ``config``, running until the ``async with`` ends (then stopped in reverse order:
    loops, scraper, HTTP client, gateway, store, registry).

    Args:
        config: the loaded YAML configuration.
        scrape: start the scraper (tests of the API alone pass False).
        clock: epoch-ms clock used for "now" (tests pin it).
        store: a store to use instead of the one ``config`` names (tests); closed at exit too.
        gateway: run the gateway (the app then mounts the inference paths and ``/gateway/metrics``).
        gateway_options: the gateway's tunables (default ``GatewayOptions()``).
        queued_options: queued (async) requests' tunables (default ``QueuedOptions()``).
    """
    async with AsyncExitStack() as stack:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
        registry = Registry.open(str(config.registry_url), pepper=key_pepper(config))
        stack.callback(registry.close)
        apply_config(config, registry)
        opened = _store_for(config, store)
        stack.callback(opened.close)
        service = _limited(Service(config, registry, opened, SelfMetrics(), clock, egress=egress_of(config)))
        if isinstance(opened, SelfMonitored):  # an engine store: queue, sent, failed, retries
            service.metrics.watch_remote_write(opened.remote_write_stats)
        if gateway:
            service.gateway, service.queued = await stack.enter_async_context(
                running_gateway(registry, clock, gateway_options, queued_options, service.egress)
            )
        loops: list[Loop] = [_retention(service)]
        if scrape:
            service.scraper = await _scraper(stack, service)
            loops.insert(0, _refresh_targets(service, service.scraper))
        await stack.enter_async_context(_tasks(*loops))
        yield service
