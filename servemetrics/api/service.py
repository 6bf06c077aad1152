"""``open_service(config, …)``: the running service's parts, opened in order and closed in reverse.

Wiring happens here, in ``api/app.py`` and in ``cli.py`` only (STYLE: config is read at the edge and
passed down). ``open_service`` opens the registry (applying the YAML's static declarations), the sample
store and the service's own metrics, starts the gateway (docs/gateway.md), whose series the scraper
reads in-process like a target's (``GATEWAY_TARGET_URL`` through ``ExpositionTransport``), the scraper
over the registry's targets (refreshed every ``TARGET_REFRESH_S`` and after registry writes) and the
retention loop. Leaving the ``async with`` stops them in the reverse order. It needs no FastAPI:
``create_app`` only keeps the ``Service`` in ``app.state.service``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from anyio import CapacityLimiter

from servemetrics.api import api_limit
from servemetrics.api.api_limit import ApiRateLimiter
from servemetrics.api.auth_limit import FailedAuthLimiter, unlimited
from servemetrics.api.export_limit import ExportRateLimit
from servemetrics.api.export_view import SnapshotCache
from servemetrics.api.ingest_pool import IngestPool
from servemetrics.api.read_pool import ReadPool
from servemetrics.api.series_limit import ActiveSeries
from servemetrics.config import Config, apply_config, egress_of, engine_options, key_pepper
from servemetrics.gateway import Gateway, GatewayOptions
from servemetrics.gateway.gateway import InFlightTokens
from servemetrics.gateway.metrics import ExpositionTransport
from servemetrics.gateway.model_api_calls import ModelApiGateway
from servemetrics.gateway.queued import QueuedOptions, QueuedRequests
from servemetrics.gateway.queued_store import QueuedStore
from servemetrics.ingest.pod_times import PodTimes
from servemetrics.ingest.scrape_limits import ScrapeLimits
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.ingest.targets import targets_from_registry
from servemetrics.netpolicy import Egress, guarded_client
from servemetrics.query.engines import EngineCache
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.registry import Registry
from servemetrics.samples import SampleBatch
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store import Store, open_store
from servemetrics.store.base import SelfMonitored
from servemetrics.timeutil import wall_clock_ms

IN_FLIGHT_TOKENS = "baseten_llm_in_flight_tokens"

log = logging.getLogger(__name__)
TARGET_REFRESH_S = 30.0
"""Seconds between two reads of the registry's scrape targets without a registry write between."""
TARGET_REFRESH_MIN_S = 1.0
"""Seconds at least between two reads of the scrape targets (registry writes come in bursts)."""
RETENTION_EVERY_S = 3600.0
IMPORT_SPOOL = ("import-spool-", ".om")
"""Prefix and suffix of the file in ``data_dir`` that ``POST /v1/import`` spools its body to; one left
by a killed service is removed at the next start (``remove_import_spools``)."""
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
        api_limiter: the management API's limits per key and endpoint (``api_rate_limit``; by default
            none).
        series_limit: active series per organization (``limits.series_per_organization``; by default
            none): every ingest path passes its batches through ``series_limit.admit``.
        ingest: the worker threads and queue of pushed bodies (config ``ingest``).
        reads: the worker threads that compute metrics answers, with single-flight (config ``reads``).
        engines: engine detection per model, cached (``query.engines``; ``GET .../engines``).
        export_limit: ``GET /metrics`` requests per organization per minute (platform-facts §2).
        exports: the export's snapshot per organization (``api/export_view.SnapshotCache``).
        model_api_calls: (organization id, Model API name) -> epoch ms of its last call through this
            process (``last_used``; docs/model-apis.md).
        model_api_gateway: the Model API calls on the gateway, None when the gateway is off.
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
    api_limiter: ApiRateLimiter = field(default_factory=api_limit.unlimited)
    series_limit: ActiveSeries = field(default_factory=lambda: ActiveSeries(0, lambda _: None, wall_clock_ms))
    ingest: IngestPool = field(default_factory=lambda: IngestPool(2, 4, 5.0))
    reads: ReadPool = field(default_factory=lambda: ReadPool(2))
    engines: EngineCache = field(default_factory=EngineCache)
    export_limit: ExportRateLimit = field(default_factory=lambda: ExportRateLimit(wall_clock_ms))
    exports: SnapshotCache = field(default_factory=lambda: SnapshotCache(wall_clock_ms))
    model_api_calls: dict[tuple[int, str], int] = field(default_factory=dict)
    model_api_gateway: ModelApiGateway | None = None

    def called(self, organization_id: int, name: str) -> None:
        """Note a call of the organization's Model API ``name`` now (``last_used``)."""
        self.model_api_calls[(organization_id, name)] = self.clock()

    def last_used(self, organization_id: int, name: str) -> int | None:
        """Epoch ms of the last call of the organization's Model API ``name`` through this process (None:
        none since it started): the SDK's ``org_details.last_used_at``."""
        return self.model_api_calls.get((organization_id, name))

    def append(self, batch: SampleBatch) -> int:
        """Store ``batch`` without the series the active-series limit refuses; the samples stored."""
        return self.store.append(self.series_limit.admit(batch))


def _org_of(registry: Registry, model_id: str) -> str | None:
    """The organization of model ``model_id``, None when the registry has no such model."""
    model = registry.tenancy.model(model_id, None)
    return None if model is None else model.organization_name


GATEWAY_TARGET_URL = "http://gateway.in-process/gateway/metrics"
"""The gateway's target: answered in-process (``ExpositionTransport``), never over the network."""


def gateway_target() -> Target:
    """The gateway's own series as a target with no registry labels: its series carry their own
    ``model_id``, ``deployment_id``, ``environment`` ... (``adapt`` keeps them)."""
    return Target(GATEWAY_TARGET_URL, ())


def scrape_targets(registry: Registry, extra: tuple[Target, ...] = ()) -> list[Target]:
    """Every replica and trainer target of the registry with the labels the scraper attaches, then
    ``extra`` (``ingest.targets.targets_from_registry``)."""
    return targets_from_registry(registry.list_targets(), registry.trainers.list_trainer_targets(), extra)


def _scrape_client(
    egress: Egress,
    trusted: httpx.AsyncClient,
    checked: httpx.AsyncClient,
    in_process: httpx.AsyncClient | None,
    target: Target,
) -> httpx.AsyncClient:
    """``in_process`` (the gateway's ``ExpositionTransport``) for ``GATEWAY_TARGET_URL``, ``checked`` for
    a target the config file does not declare (``Egress.for_target``), else ``trusted``."""
    if in_process is not None and target.url == GATEWAY_TARGET_URL:
        return in_process
    deployment_id = target.label_dict.get("deployment_id")
    if deployment_id is None or egress.for_target(deployment_id, target.url) is None:
        return trusted
    return checked


async def _refresh_targets(service: Service, scraper: Scraper) -> None:
    """Give the scraper the registry's targets every ``TARGET_REFRESH_S``, and soon after each write to
    the registry (at most once a ``TARGET_REFRESH_MIN_S``): a replica failed, back or registered is
    scraped or left at once."""
    changed = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wake() -> None:  # called in the writing thread
        with contextlib.suppress(RuntimeError):  # the event loop is closed
            loop.call_soon_threadsafe(changed.set)

    service.registry.listeners.append(wake)
    try:
        while True:
            changed.clear()
            try:
                extra = (gateway_target(),) if service.gateway is not None else ()
                scraper.set_targets(await asyncio.to_thread(scrape_targets, service.registry, extra))
            except Exception:
                log.exception("refreshing scrape targets failed; keeping the previous ones")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), TARGET_REFRESH_S)
            await asyncio.sleep(TARGET_REFRESH_MIN_S)
    finally:
        service.registry.listeners.remove(wake)


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


def gateway_options_of(config: Config) -> GatewayOptions:
    """The gateway's tunables the config file sets (its ``health`` section: check interval, timeout,
    failures, the FAILED replicas' backoff; ``gateway.server_timing_metric``); the others keep
    ``GatewayOptions``' defaults."""
    h = config.health
    return GatewayOptions(
        health_interval_s=h.interval,
        health_timeout_s=h.timeout,
        health_failures=h.failures,
        recovery_backoff_s=h.recovery_backoff,
        recovery_backoff_max_s=h.recovery_backoff_max,
        server_timing_metric=config.gateway.server_timing_metric,
    )


@asynccontextmanager
async def running_gateway(
    registry: Registry,
    clock: Clock,
    options: GatewayOptions | None = None,
    queued_options: QueuedOptions | None = None,
    egress: Egress | None = None,
    in_flight_tokens: InFlightTokens | None = None,
) -> AsyncIterator[tuple[Gateway, QueuedRequests]]:
    """The gateway over ``registry`` (``GatewayOptions()`` by default; ``egress``: the network policies,
    None: none; ``in_flight_tokens``: the reader of deployments' in-flight tokens, None: none) and its
    queued requests, started; stopped at exit (queued requests first)."""
    gateway = Gateway(registry, clock, options or GatewayOptions(), egress, in_flight_tokens)
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


def in_flight_tokens_reader(store: Store, clock: Clock) -> InFlightTokens:
    """``(model_id, deployment_id)`` -> the deployment's ``baseten_llm_in_flight_tokens`` as the metrics API
    answers it in CURRENT mode (each series' latest sample within 5 minutes, one source per replica,
    summed), None when it has no series: the load of ``desired_replicas`` on tokens (docs/gateway.md)."""

    def read(model_id: str, deployment_id: str) -> float | None:
        now = clock()
        one = frozenset({deployment_id})
        plan = build_plan(
            model_id, Mode.CURRENT, None, None, [IN_FLIGHT_TOKENS], lambda s, _e: [(s, one)], now
        )
        result = execute(plan, store)
        return result.rows[0].values[0][0] if result.descriptors else None

    return read


def remove_import_spools(data_dir: Path) -> int:
    """Delete the import spool files (``IMPORT_SPOOL``) in ``data_dir``, left by imports a crash or
    ``kill -9`` cut short; returns how many. Called at start once the store is open: its lock (the
    DuckDB file's, or the remote_write buffer's) means no other service is importing into ``data_dir``."""
    prefix, suffix = IMPORT_SPOOL
    spools = list(data_dir.glob(f"{prefix}*{suffix}"))
    for path in spools:
        path.unlink(missing_ok=True)
    return len(spools)


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
    """The scraper of ``service`` with its HTTP clients (a trusted one, one the ``egress`` targets
    policy checks, and the gateway's in-process one), stopped and closed by ``stack``."""
    config, egress = service.config, service.egress
    assert egress is not None
    client = await stack.enter_async_context(httpx.AsyncClient())
    checked = await stack.enter_async_context(guarded_client(egress.targets))
    gateway = service.gateway
    in_process = None
    if gateway is not None:
        transport = ExpositionTransport(gateway.metrics.exposition)
        in_process = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
    scraper = Scraper(
        client,
        service.append,
        config.scrape_interval,
        config.scrape_timeout,
        service.metrics,
        client_of=functools.partial(_scrape_client, egress, client, checked, in_process),
        limits=ScrapeLimits(**config.scrape_limits()),
        limiter=CapacityLimiter(config.ingest.workers),
        on_pods=functools.partial(_record_pods, service.registry),
    )
    stack.push_async_callback(scraper.stop)
    return scraper


def _record_pods(registry: Registry, target: Target, pods: list[PodTimes], ts_ms: int) -> None:
    """The scraper's ``on_pods``: each pod's kube-state-metrics timestamps become a startup attempt of the
    target's replica (``Startups.record_pod``; a pod shown Failed ends at this scrape's ``ts_ms``)."""
    deployment_id, replica = target.label_dict["deployment_id"], target.label_dict["replica"]
    for pod in pods:
        failed_at = ts_ms if pod.failed else None
        registry.startups.record_pod(deployment_id, replica, pod.uid, pod.marks, failed_at)


def _limited(service: Service) -> Service:
    """``service`` with the limits its config sets (failed authentications, the management API's per-key
    limits, active series, ingest) and the export's rate limit and snapshots on its clock."""
    config, clock = service.config, service.clock
    limit = config.auth_rate_limit
    service.auth_limiter = FailedAuthLimiter(limit.failures, round(limit.window * 1000), clock)
    service.api_limiter = ApiRateLimiter(**config.api_rate_limit.model_dump(), clock=clock)
    service.series_limit = ActiveSeries(
        config.limits.series_per_organization,
        functools.partial(_org_of, service.registry),
        clock,
        service.metrics,
    )
    pushed = config.ingest
    service.ingest = IngestPool(pushed.workers, pushed.queue, pushed.retry_after, service.metrics)
    service.reads = ReadPool(config.reads.workers)
    service.export_limit, service.exports = ExportRateLimit(clock), SnapshotCache(clock)
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
        gateway_options: the gateway's tunables (default: ``gateway_options_of(config)``).
        queued_options: queued (async) requests' tunables (default ``QueuedOptions()``).
    """
    async with AsyncExitStack() as stack:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
        registry = Registry.open(str(config.registry_url), pepper=key_pepper(config))
        stack.callback(registry.close)
        apply_config(config, registry)
        opened = _store_for(config, store)
        stack.callback(opened.close)
        remove_import_spools(Path(config.data_dir))  # after the store's lock kept off a second service
        service = _limited(Service(config, registry, opened, SelfMetrics(), clock, egress=egress_of(config)))
        if isinstance(opened, SelfMonitored):  # an engine store: queue, sent, failed, retries
            service.metrics.watch_remote_write(opened.remote_write_stats)
        if gateway:
            options = gateway_options or gateway_options_of(config)
            tokens = in_flight_tokens_reader(opened, clock)
            gw, service.queued = await stack.enter_async_context(
                running_gateway(registry, clock, options, queued_options, service.egress, tokens)
            )
            service.gateway, service.model_api_gateway = gw, ModelApiGateway(gw, service.called)
        loops: list[Loop] = [_retention(service)]
        if scrape:
            service.scraper = await _scraper(stack, service)
            loops.insert(0, _refresh_targets(service, service.scraper))
        await stack.enter_async_context(_tasks(*loops))
        yield service
