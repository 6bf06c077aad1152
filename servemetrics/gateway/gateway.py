"""``Gateway``: route an inference request to a replica, apply backpressure, relay and meter it.

Routing (docs/gateway.md): an environment's request goes to one of the deployments serving it now,
chosen at random with the running rolling promotion's split (``percent`` % to the new deployment);
inside a deployment, to the active replica with the fewest outstanding requests (ties at random). A
replica that refuses the connection is skipped for the next best one (the request never reached it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import httpx
from starlette.requests import Request
from starlette.responses import Response

from servemetrics.gateway.backpressure import Full, Gate
from servemetrics.gateway.health import Health
from servemetrics.gateway.metrics import DeploymentGauges, GatewayMetrics
from servemetrics.gateway.proxy import Refused, Relay, Upstream, UpstreamError, error, request_headers
from servemetrics.gateway.state import DeploymentView, RegistryView, Replica
from servemetrics.registry import AutoscalingSettings, DeploymentInfo, ModelInfo, Registry

log = logging.getLogger(__name__)
PATH_SAFE = "/!$&'()*+,;=:@-._~"
"""Characters left as they are when the (decoded) path is sent on to the replica."""


@dataclass(frozen=True)
class GatewayOptions:
    """Tunables of the gateway (seconds unless named otherwise)."""

    state_ttl_s: float = 1.0
    health_interval_s: float = 2.0
    health_timeout_s: float = 1.0
    health_failures: int = 2
    queue_limit: int = 1000
    queue_timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    upstream_timeout_s: float = 600.0


def desired_replicas(concurrency: int, a: AutoscalingSettings) -> int:
    """ceil(concurrency / (concurrency_target x target_utilization_percentage / 100)), clamped to
    ``[min_replica, max_replica]``: what the autoscaler would ask for at this concurrency."""
    per_replica = a.concurrency_target * a.target_utilization_percentage / 100
    wanted = math.ceil(round(concurrency / per_replica, 9))
    return max(a.min_replica, min(a.max_replica, wanted))


class Gateway:
    """The gateway of one service process (start it inside the event loop, stop it at shutdown)."""

    def __init__(self, registry: Registry, clock_ms: Callable[[], int], options: GatewayOptions) -> None:
        self.options = options
        self.view = RegistryView(registry, clock_ms, options.state_ttl_s)
        self.metrics = GatewayMetrics(self.gauges)
        self._upstream = Upstream(options.connect_timeout_s, options.upstream_timeout_s)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(options.upstream_timeout_s, connect=options.connect_timeout_s),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=512),
        )
        self.health = Health(
            self._client,
            registry,
            self._health_changed,
            options.health_interval_s,
            options.health_timeout_s,
            options.health_failures,
        )
        self._gates: dict[str, Gate] = {}
        self._settings: dict[str, DeploymentInfo] = {}
        self._outstanding: dict[tuple[str, str], int] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the registry once and start the refresh loop (and the health loops)."""
        await self._refresh()
        self._task = asyncio.create_task(self._refresh_loop())

    async def stop(self) -> None:
        """Stop the loops and close the HTTP client."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.health.stop()
        await self._client.aclose()
        await self._upstream.aclose()

    def invalidate(self) -> None:
        """Forget the cached registry state (after a management change)."""
        self.view.invalidate()

    async def _refresh(self) -> None:
        views = await self.view.refresh_deployments()
        infos = await asyncio.to_thread(self._read_settings, views)
        self._settings.update(infos)
        self.health.sync(views)
        self._health_changed(invalidate=False)

    def _read_settings(self, views: dict[str, DeploymentView]) -> dict[str, DeploymentInfo]:
        found = {d: self.view.registry.deployment(v.labels[0], d) for d, v in views.items()}
        return {d: info for d, info in found.items() if info is not None}

    async def _refresh_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.view.changed.wait(), self.options.state_ttl_s)
            self.view.changed.clear()
            try:
                await self._refresh()
            except Exception:  # a registry hiccup must not stop routing updates
                log.exception("gateway refresh failed; retrying")

    def _health_changed(self, invalidate: bool = True) -> None:
        for dep_id, gate in self._gates.items():
            gate.set_capacity(self._capacity(dep_id))
        if invalidate:
            self.view.invalidate()

    def _active(self, dep_id: str) -> list[Replica]:
        view = self.view.deployments.get(dep_id)
        return [r for r in view.replicas if self.health.is_active(r)] if view else []

    def _capacity(self, dep_id: str) -> int:
        info = self._settings.get(dep_id)
        target = info.autoscaling.concurrency_target if info else 1
        return target * len(self._active(dep_id))

    def _gate(self, dep_id: str) -> Gate:
        gate = self._gates.get(dep_id)
        if gate is None:
            o = self.options
            gate = self._gates[dep_id] = Gate(self._capacity(dep_id), o.queue_limit, o.queue_timeout_s)
        return gate

    def gauges(self) -> list[DeploymentGauges]:
        """Per deployment with serving replicas: concurrency, replicas active / starting / desired."""
        out = []
        for dep_id, view in sorted(self.view.deployments.items()):
            gate = self._gates.get(dep_id)
            concurrent = gate.in_flight + gate.queued if gate else 0
            active = len(self._active(dep_id))
            info = self._settings.get(dep_id)
            desired = desired_replicas(concurrent, info.autoscaling) if info else active
            out.append(
                DeploymentGauges(view.labels, concurrent, active, len(view.replicas) - active, desired)
            )
        return out

    async def to_environment(self, request: Request, model: ModelInfo, env_name: str, path: str) -> Response:
        """Forward to a deployment serving ``env_name`` now (weighted by a rolling promotion)."""
        arrived = time.perf_counter()
        serving = await self.view.serving(model.id, env_name)
        if serving is None:
            return error(404, f"model {model.id!r} has no environment {env_name!r}")
        weights = serving.weights(self.view.clock_ms())
        if not weights:
            return error(503, f"environment {env_name!r} serves no deployment (inactive, or never promoted)")
        dep_id = _choose(weights)
        return await self._forward(request, model, dep_id, path, arrived, env_name)

    async def to_deployment(
        self, request: Request, model: ModelInfo, deployment_id: str, path: str
    ) -> Response:
        """Forward to deployment ``deployment_id`` (``production`` / ``development``: that environment's)."""
        arrived = time.perf_counter()
        info = await self.view.deployment(model.id, deployment_id)
        if info is None:
            return error(404, f"model {model.id!r} has no deployment {deployment_id!r}")
        return await self._forward(request, model, info.id, path, arrived, "")

    async def _forward(
        self, request: Request, model: ModelInfo, dep_id: str, path: str, arrived: float, env: str
    ) -> Response:
        info = await self.view.deployment(model.id, dep_id)
        if info is not None:
            self._settings[dep_id] = info
        view = self.view.deployments.get(dep_id)
        labels = view.labels if view else (model.id, model.name, dep_id, env, "")
        self.metrics.count_incoming(labels)
        body = await request.body()

        def answer(resp: Response) -> Response:
            elapsed = time.perf_counter() - arrived
            size = len(resp.body)
            self.metrics.observe(
                labels, resp.status_code, ttfb_s=elapsed, end_to_end_s=elapsed, request_bytes=len(body),
                response_bytes=size,
            )  # fmt: skip
            return resp

        if info is None or info.status == "INACTIVE" or view is None or not view.replicas:
            why = "is inactive" if info and info.status == "INACTIVE" else "has no serving replica"
            return answer(error(503, f"deployment {dep_id!r} {why}", 1))
        gate = self._gate(dep_id)
        try:
            await gate.enter(info.request_backpressure_policy)
        except Full as exc:
            return answer(error(429, f"{exc}; retry after {exc.retry_after_s} s", exc.retry_after_s))
        return await self._send(request, body, labels, dep_id, path, arrived, gate, answer)

    async def _send(
        self,
        request: Request,
        body: bytes,
        labels: tuple[str, ...],
        dep_id: str,
        path: str,
        arrived: float,
        gate: Gate,
        answer: Callable[[Response], Response],
    ) -> Response:
        tried: set[str] = set()
        while True:
            replica = self._pick(dep_id, tried)
            if replica is None:
                gate.leave()
                return answer(error(503, f"deployment {dep_id!r} has no active replica", 1))
            key = (dep_id, replica.name)
            self._outstanding[key] = self._outstanding.get(key, 0) + 1
            query = request.url.query
            target = "/" + quote(path, safe=PATH_SAFE)
            try:
                upstream = await self._upstream.send(
                    request.method,
                    replica.base_url,
                    f"{target}?{query}" if query else target,
                    request_headers(request.headers.raw),
                    body,
                )
            except Refused:
                self._outstanding[key] -= 1
                tried.add(replica.name)
                continue
            except UpstreamError as exc:
                self._outstanding[key] -= 1
                gate.leave()
                return answer(error(502, f"replica {replica.name!r} of {dep_id!r} failed: {exc}"))
            break

        def done(relay: Relay) -> None:
            self._outstanding[key] -= 1
            gate.leave(relay.end_to_end_s)
            assert relay.first_byte_s is not None and relay.end_to_end_s is not None
            self.metrics.observe(
                labels, relay.status_code, ttfb_s=relay.first_byte_s, end_to_end_s=relay.end_to_end_s,
                request_bytes=len(body), response_bytes=relay.sent_bytes,
            )  # fmt: skip

        extra = [
            (b"x-servemetrics-deployment-id", dep_id.encode()),
            (b"x-servemetrics-replica", key[1].encode()),
        ]
        return Relay(upstream, arrived, done, extra)

    def _pick(self, dep_id: str, tried: set[str]) -> Replica | None:
        """The active replica with the fewest outstanding requests (ties at random)."""
        candidates = [r for r in self._active(dep_id) if r.name not in tried]
        if not candidates:
            return None
        return min(candidates, key=lambda r: (self._outstanding.get((dep_id, r.name), 0), random.random()))


def _choose(weights: list[tuple[str, float]]) -> str:
    """A deployment id drawn with the given shares."""
    if len(weights) == 1:
        return weights[0][0]
    x = random.random()
    for dep_id, share in weights:
        if x < share:
            return dep_id
        x -= share
    return next(d for d, s in reversed(weights) if s > 0)
