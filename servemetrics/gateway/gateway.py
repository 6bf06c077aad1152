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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

import httpx
from starlette.requests import Request
from starlette.responses import Response

from servemetrics.gateway.backpressure import Full, Gate
from servemetrics.gateway.errors import error_response as error
from servemetrics.gateway.errors import no_active_replica, replica_failed
from servemetrics.gateway.health import Backoff, Health
from servemetrics.gateway.metrics import DeploymentGauges, DeploymentLabels, GatewayMetrics
from servemetrics.gateway.proxy import Blocked, Refused, Relay, Upstream, UpstreamError, request_headers
from servemetrics.gateway.server_timing import duration_s
from servemetrics.gateway.state import DeploymentView, RegistryView, Replica, choose_deployment
from servemetrics.netpolicy import Egress, NetPolicy, guarded_client
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
    recovery_backoff_s: float = 1.0
    """Before the first check of a FAILED replica; each next delay doubles (``health.Backoff``)."""
    recovery_backoff_max_s: float = 60.0
    """The longest delay between two checks of a FAILED replica."""
    queue_limit: int = 1000
    queue_timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    upstream_timeout_s: float = 600.0
    tokens_interval_s: float = 10.0
    """Between two reads of the in-flight tokens of the deployments that scale on them."""
    server_timing_metric: str = "inference"
    """The replica's ``Server-Timing`` entry whose ``dur`` is metered as ``baseten_inference_time_seconds``
    (``server_timing.duration_s``; "": not read)."""


InFlightTokens = Callable[[str, str], float | None]
"""``(model_id, deployment_id)`` -> the deployment's in-flight tokens now (``baseten_llm_in_flight_tokens``
as the metrics API answers it in CURRENT mode), None without a series; may block (run in a thread)."""


def desired_replicas(concurrency: int, a: AutoscalingSettings, in_flight_tokens: float | None = None) -> int:
    """ceil(load / (target x target_utilization_percentage / 100)), clamped to ``[min_replica,
    max_replica]``: what the autoscaler would ask for now (docs/gateway.md "Desired replicas").

    The load is the concurrency (requests in flight + queued) against ``concurrency_target``; when the
    settings carry ``target_in_flight_tokens`` (metrics-dashboard.md: "BIS-LLM deployments target
    in-flight tokens instead") and ``in_flight_tokens`` is known, it is those tokens against that target.
    Without a token reading (no series in the last 5 minutes) concurrency stays the load."""
    load, target = float(concurrency), a.concurrency_target
    if a.target_in_flight_tokens is not None and in_flight_tokens is not None:
        load, target = in_flight_tokens, a.target_in_flight_tokens
    per_replica = target * a.target_utilization_percentage / 100
    wanted = math.ceil(round(load / per_replica, 9))
    return max(a.min_replica, min(a.max_replica, wanted))


class Attempt:
    """One synchronous request (or WebSocket connection) from its arrival to its last byte: what it is
    metered with and what it holds. ``gate`` is the deployment's gate once the request is admitted (one
    slot), ``replica`` the (deployment, replica) key while a replica has it (one outstanding request).
    ``answer`` (a gateway answer: 429, 502, 503), ``done`` (a relay ended) and ``closed`` (a WebSocket
    connection ended) give back what it holds and meter it once; ``abandon`` gives the slot back when
    sending failed with an exception (no answer to meter)."""

    __slots__ = ("_gateway", "labels", "body", "arrived", "gate", "replica")

    def __init__(self, gateway: Gateway, labels: DeploymentLabels, body: bytes, arrived: float) -> None:
        self._gateway = gateway
        self.labels = labels
        self.body = body
        self.arrived = arrived  # time.perf_counter() at arrival
        self.gate: Gate | None = None
        self.replica: tuple[str, str] | None = None

    def answer(self, resp: Response) -> Response:
        """Free the slot (if admitted) and meter ``resp`` (first byte = last byte = now); returns it."""
        gate, self.gate = self.gate, None  # given back once, even if metering raises
        if gate is not None:
            gate.leave()
        elapsed = time.perf_counter() - self.arrived
        self._gateway.metrics.observe(
            self.labels, resp.status_code, ttfb_s=elapsed, end_to_end_s=elapsed,
            request_bytes=len(self.body), response_bytes=len(resp.body),
        )  # fmt: skip
        return resp

    def abandon(self) -> None:
        """Sending raised (cancelled: the client left before the replica's answer head): free the slot
        unless ``answer`` already did."""
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.leave()

    def opened(self) -> None:
        """The WebSocket connection to ``replica`` is open: one more in ``open_websockets``."""
        assert self.replica is not None
        websockets = self._gateway.open_websockets
        websockets[self.replica[0]] = websockets.get(self.replica[0], 0) + 1

    def closed(self, close_code: int) -> None:
        """The open WebSocket connection ended with ``close_code``: one less in ``open_websockets``, the
        replica and the slot given back, the connection counted by that code
        (``GatewayMetrics.count_closed``)."""
        assert self.gate is not None and self.replica is not None
        gate, self.gate = self.gate, None
        self._gateway.open_websockets[self.replica[0]] -= 1
        self._gateway.release(self.replica)
        gate.leave()
        self._gateway.metrics.count_closed(self.labels, close_code)

    def done(self, relay: Relay) -> None:
        """The relay ended (finished, client gone, replica error): give the replica and the slot back
        and meter the answer with the relay's timings and the replica's ``Server-Timing`` inference time
        (``GatewayOptions.server_timing_metric``)."""
        assert self.gate is not None and self.replica is not None
        self._gateway.release(self.replica)
        self.gate.leave(relay.end_to_end_s)
        assert relay.first_byte_s is not None and relay.end_to_end_s is not None
        inference_s = duration_s(relay.upstream.headers, self._gateway.options.server_timing_metric)
        self._gateway.metrics.observe(
            self.labels, relay.metered_status, ttfb_s=relay.first_byte_s, end_to_end_s=relay.end_to_end_s,
            request_bytes=len(self.body), response_bytes=relay.sent_bytes, inference_s=inference_s,
        )  # fmt: skip


class Gateway:
    """The gateway of one service process (start it inside the event loop, stop it at shutdown).

    Besides the synchronous paths it offers what queued (async) requests need to share the
    deployments' capacity: ``gate``, ``settings``, ``pick``, ``outstanding`` and ``excluded``.
    ``egress`` (None: every replica trusted) checks the address of each replica the config file does not
    declare, for requests and health checks alike (``policy_of``).
    """

    def __init__(
        self,
        registry: Registry,
        clock_ms: Callable[[], int],
        options: GatewayOptions,
        egress: Egress | None = None,
        in_flight_tokens: InFlightTokens | None = None,
    ) -> None:
        self.options = options
        self.egress = egress
        self._read_tokens = in_flight_tokens
        self._tokens: dict[str, float | None] = {}
        self._tokens_read_at = -math.inf
        self.view = RegistryView(registry, clock_ms, options.state_ttl_s)
        self.metrics = GatewayMetrics(self.gauges)
        self._upstream = Upstream(options.connect_timeout_s, options.upstream_timeout_s)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
        self._health_client = httpx.AsyncClient(timeout=options.health_timeout_s, limits=limits)
        self._checked_health_client = (
            guarded_client(egress.targets, timeout=options.health_timeout_s, limits=limits)
            if egress is not None
            else self._health_client
        )
        self.health = Health(
            self._health_client,
            registry,
            self._health_changed,
            options.health_interval_s,
            options.health_timeout_s,
            options.health_failures,
            client_of=self._health_client_of,
            backoff=Backoff(options.recovery_backoff_s, options.recovery_backoff_max_s),
        )
        self._gates: dict[str, Gate] = {}
        self._settings: dict[str, DeploymentInfo] = {}
        self._outstanding: dict[tuple[str, str], int] = {}
        self.excluded: dict[str, int] = {}
        """Deployment id -> slots held by requests ``baseten_concurrent_requests`` leaves out (queued
        requests' executions; their owner counts them here)."""
        self.open_websockets: dict[str, int] = {}
        """Deployment id -> WebSocket connections open now (``baseten_ongoing_websocket_connections``); a
        deployment is here from its first connection on (``Attempt.opened``)."""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the registry once and start the refresh loop (and the health loops)."""
        self.view.watch()
        await self._refresh()
        self._task = asyncio.create_task(self._refresh_loop())

    async def stop(self) -> None:
        """Stop the loops and close the HTTP clients."""
        self.view.unwatch()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.health.stop()
        await self._health_client.aclose()
        await self._checked_health_client.aclose()
        await self._upstream.aclose()

    def policy_of(self, replica: Replica) -> NetPolicy | None:
        """The policy connections to ``replica`` are checked with; None: trusted (declared in the config
        file, or no ``egress``)."""
        if self.egress is None:
            return None
        return self.egress.for_target(replica.deployment_id, replica.base_url)

    def _health_client_of(self, replica: Replica) -> httpx.AsyncClient:
        return self._health_client if self.policy_of(replica) is None else self._checked_health_client

    async def _refresh(self) -> None:
        views = await self.view.refresh_deployments()
        infos = await asyncio.to_thread(self._read_settings, views)
        self._settings.update(infos)
        self.health.sync(views, self.view.failed)
        self._health_changed(invalidate=False)
        if time.monotonic() - self._tokens_read_at >= self.options.tokens_interval_s:
            self._tokens_read_at = time.monotonic()
            self._tokens = await asyncio.to_thread(self._read_in_flight_tokens)

    def _read_in_flight_tokens(self) -> dict[str, float | None]:
        """The in-flight tokens of every deployment whose settings carry ``target_in_flight_tokens``."""
        if self._read_tokens is None:
            return {}
        return {
            d: self._read_tokens(info.model_id, d)
            for d, info in self._settings.items()
            if info.autoscaling.target_in_flight_tokens is not None
        }

    def _read_settings(self, views: dict[str, DeploymentView]) -> dict[str, DeploymentInfo]:
        found = {d: self.view.registry.deployments.deployment(v.labels.model_id, d) for d, v in views.items()}
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

    def gate(self, dep_id: str) -> Gate:
        """The deployment's admission gate (made at its first use, with the current capacity)."""
        gate = self._gates.get(dep_id)
        if gate is None:
            o = self.options
            gate = self._gates[dep_id] = Gate(self._capacity(dep_id), o.queue_limit, o.queue_timeout_s)
        return gate

    def settings(self, dep_id: str) -> DeploymentInfo | None:
        """The deployment's settings as last read from the registry (None: not read yet)."""
        return self._settings.get(dep_id)

    def gauges(self) -> list[DeploymentGauges]:
        """Per deployment with serving replicas: concurrency (in flight + queued, less ``excluded``; open
        WebSocket connections hold a slot each, so they count), replicas active / starting / desired
        (desired counts ``excluded`` too), open WebSocket connections (None before the first). Desired
        is None (not exported) while the deployment's autoscaling settings are unknown: not read yet, or
        never set through the API (``DeploymentInfo.autoscaling_known``; the defaults would say 0 beside
        2 active)."""
        out = []
        for dep_id, view in sorted(self.view.deployments.items()):
            gate = self._gates.get(dep_id)
            concurrent = gate.in_flight + gate.queued if gate else 0
            active = len(self._active(dep_id))
            info = self._settings.get(dep_id)
            tokens = self._tokens.get(dep_id)
            known = info is not None and info.autoscaling_known
            desired = desired_replicas(concurrent, info.autoscaling, tokens) if known and info else None
            concurrent -= self.excluded.get(dep_id, 0)
            starting = len(view.replicas) - active
            websockets = self.open_websockets.get(dep_id)
            out.append(DeploymentGauges(view.labels, concurrent, active, starting, desired, websockets))
        return out

    async def environment_target(self, model: ModelInfo, env_name: str) -> tuple[str, str] | Response:
        """``(deployment id, env_name)``: a deployment serving ``env_name`` now (weighted by a rolling
        promotion); an error answer (404 no such environment, 503 nothing serves it) otherwise."""
        serving = await self.view.serving(model.id, env_name)
        if serving is None:
            return error(404, f"model {model.id!r} has no environment {env_name!r}")
        weights = serving.weights(self.view.clock_ms())
        if not weights:
            return error(503, f"environment {env_name!r} serves no deployment (inactive, or never promoted)")
        return choose_deployment(weights), env_name

    async def deployment_target(self, model: ModelInfo, deployment_id: str) -> tuple[str, str] | Response:
        """``(deployment id, "")`` of ``deployment_id`` (``production`` / ``development``: that
        environment's current deployment); a 404 answer when the model has no such deployment."""
        info = await self.view.deployment(model.id, deployment_id)
        if info is None:
            return error(404, f"model {model.id!r} has no deployment {deployment_id!r}")
        return info.id, ""

    async def to_environment(
        self, request: Request, model: ModelInfo, env_name: str, path: str
    ) -> Response | Relay:
        """Forward to a deployment serving ``env_name`` now (weighted by a rolling promotion)."""
        arrived = time.perf_counter()
        target = await self.environment_target(model, env_name)
        if isinstance(target, Response):
            return target
        return await self.forward(request, model, target, path, arrived)

    async def to_deployment(
        self, request: Request, model: ModelInfo, deployment_id: str, path: str
    ) -> Response | Relay:
        """Forward to deployment ``deployment_id`` (``production`` / ``development``: that environment's)."""
        arrived = time.perf_counter()
        target = await self.deployment_target(model, deployment_id)
        if isinstance(target, Response):
            return target
        return await self.forward(request, model, target, path, arrived)

    async def admit(
        self, model: ModelInfo, target: tuple[str, str], body: bytes, arrived: float
    ) -> Attempt | Response:
        """Count the request arriving at deployment ``target`` (``environment_target`` /
        ``deployment_target``) and take one of its slots (``arrived``: ``time.perf_counter()`` at
        arrival). Returns the attempt holding the slot, or the metered answer when there is none: 503 the
        deployment is inactive or has no serving replica, 429 it is full (its backpressure policy)."""
        dep_id, env = target
        info = await self.view.deployment(model.id, dep_id)
        if info is not None:
            self._settings[dep_id] = info
        view = self.view.deployments.get(dep_id)
        labels = view.labels if view else DeploymentLabels(model.id, model.name, dep_id, env, "")
        self.metrics.count_incoming(labels)
        attempt = Attempt(self, labels, body, arrived)
        if info is None or info.status == "INACTIVE" or view is None or not view.replicas:
            why = "is inactive" if info and info.status == "INACTIVE" else "has no serving replica"
            return attempt.answer(error(503, f"deployment {dep_id!r} {why}", 1))
        gate = self.gate(dep_id)
        try:
            await gate.enter(info.request_backpressure_policy)
        except Full as exc:
            return attempt.answer(error(429, f"{exc}; retry after {exc.retry_after_s} s", exc.retry_after_s))
        attempt.gate = gate
        return attempt

    async def forward(
        self,
        request: Request,
        model: ModelInfo,
        target: tuple[str, str],
        path: str,
        arrived: float,
        body: bytes | None = None,
    ) -> Response | Relay:
        """Admit the request at ``target`` (``admit``) and send it to a replica's ``/{path}`` with the
        request's method, query string and headers and ``body`` (None: the request's own); the relay of
        the answer, or the gateway's metered answer (429, 502, 503)."""
        attempt = await self.admit(model, target, await request.body() if body is None else body, arrived)
        if isinstance(attempt, Response):
            return attempt
        try:
            return await self._send(request, attempt, target[0], path)
        except BaseException:  # _send gave the replica back; the slot would leak for good
            attempt.abandon()
            raise

    async def _send(self, request: Request, attempt: Attempt, dep_id: str, path: str) -> Response | Relay:
        """Send to the least busy active replica (one refusing the connection: the next) and relay its
        answer; the replica is outstanding until the relay's ``done`` (or until this fails)."""
        query = request.url.query
        target = "/" + quote(path, safe=PATH_SAFE)
        tried: set[str] = set()
        while (replica := self.pick(dep_id, tried)) is not None:
            key = self.hold(replica)
            relay: Relay | None = None
            try:
                upstream = await self._upstream.send(
                    request.method,
                    replica.base_url,
                    f"{target}?{query}" if query else target,
                    request_headers(request.headers.raw),
                    attempt.body,
                    self.policy_of(replica),
                )
                attempt.replica = key
                extra = [
                    (b"x-servemetrics-deployment-id", dep_id.encode()),
                    (b"x-servemetrics-replica", key[1].encode()),
                ]
                relay = Relay(upstream, attempt.arrived, attempt.done, extra)
                return relay
            except Refused:
                tried.add(replica.name)
            except (Blocked, UpstreamError) as exc:
                return attempt.answer(replica_failed(replica.name, dep_id, exc, isinstance(exc, Blocked)))
            finally:
                if relay is None:  # else the relay's done() gives the replica back
                    self.release(key)
        return attempt.answer(no_active_replica(dep_id))

    def pick(self, dep_id: str, tried: set[str]) -> Replica | None:
        """The active replica with the fewest outstanding requests (ties at random), not in ``tried``
        (replica names); None when there is none."""
        candidates = [r for r in self._active(dep_id) if r.name not in tried]
        if not candidates:
            return None
        return min(candidates, key=lambda r: (self._outstanding.get((dep_id, r.name), 0), random.random()))

    def hold(self, replica: Replica) -> tuple[str, str]:
        """One request more outstanding on ``replica``; returns its key for ``release``."""
        key = (replica.deployment_id, replica.name)
        self._outstanding[key] = self._outstanding.get(key, 0) + 1
        return key

    def release(self, key: tuple[str, str]) -> None:
        """One request less outstanding on replica ``key`` (deployment id, replica name)."""
        self._outstanding[key] -= 1

    @contextlib.contextmanager
    def outstanding(self, replica: Replica) -> Iterator[None]:
        """Count one request outstanding on ``replica`` while the block runs (``pick`` prefers the
        replicas with the fewest)."""
        key = self.hold(replica)
        try:
            yield
        finally:
            self.release(key)
