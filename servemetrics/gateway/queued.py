"""Queued (async) requests: run QUEUED requests when their deployment has a free slot, then deliver the
webhook.

``QueuedRequests(gateway, store, options)`` runs them beside a ``Gateway`` (docs/gateway.md "Async
requests"):

- A dispatcher loop (every ``QueuedOptions.poll_interval_s``, and at once when a request arrives or an
  async execution ends) expires QUEUED requests older than their ``max_time_in_queue_s`` (EXPIRED, the
  webhook gets an error), then walks the QUEUED requests in arrival order. Each is assigned a
  deployment serving its environment (by the same weighted choice as a synchronous request, kept
  while that deployment still serves); it starts when that deployment's gate has a free slot and no
  synchronous request is waiting for one (async requests yield to synchronous ones). A deployment that
  is full holds its later requests too (FIFO per deployment).
- An execution holds one slot of the deployment's gate (so it counts against ``concurrency_target`` x
  active replicas) and one outstanding request on the replica it is sent to (least outstanding), but it
  is subtracted from ``baseten_concurrent_requests`` (the platform excludes async requests). It sends
  ``model_input`` as the JSON body of the replica's ``POST /predict``, reads at most
  ``result_limit_bytes`` of the answer, and stores it: 2xx -> SUCCEEDED, any other status -> FAILED.
  A replica refusing the connection is skipped for the next; with none left the request goes back to
  QUEUED. A replica whose address the network policy refuses (``Gateway.policy_of``) fails the request.
- The webhook of a finished (or expired) request is POSTed until a 2xx, at most ``webhook_attempts``
  times, waiting ``webhook_backoff_s`` x ``webhook_backoff_factor`` ** (n - 1) after the n-th failure.
  Its state and next due time are stored, so a restart resumes it. Each delivery's address is checked
  by the gateway's ``egress.webhooks`` policy at connect time; a refused one is a failed attempt whose
  ``last_error`` says why.

At start, IN_PROGRESS requests of a stopped service go back to QUEUED (so run one service per registry
database). It shares the gateway's routing state through the gateway's methods (``gate``, ``settings``,
``pick``, ``outstanding``, ``excluded``, the registry ``view`` and the ``metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from servemetrics.gateway.backpressure import Gate
from servemetrics.gateway.gateway import Gateway
from servemetrics.gateway.metrics import DeploymentLabels
from servemetrics.gateway.queued_metrics import NO_ANSWER_STATUS, QueuedMetrics
from servemetrics.gateway.queued_store import QueuedRequest, QueuedStore
from servemetrics.gateway.server_timing import duration_s
from servemetrics.gateway.state import Replica, choose_deployment
from servemetrics.netpolicy import guarded_client, refusal
from servemetrics.timeutil import iso_ms

log = logging.getLogger(__name__)
_JSON = {"content-type": "application/json"}


@dataclass(frozen=True)
class QueuedOptions:
    """Tunables of queued (async) requests (seconds unless named otherwise)."""

    poll_interval_s: float = 0.1
    webhook_attempts: int = 5
    webhook_backoff_s: float = 1.0
    webhook_backoff_factor: float = 2.0
    webhook_timeout_s: float = 10.0
    result_limit_bytes: int = 1 << 20
    input_limit_bytes: int = 4 << 20
    default_max_time_in_queue_s: int = 600
    max_time_in_queue_limit_s: int = 72 * 3600


def iso(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC with milliseconds (``2026-01-01T00:00:00.000Z``), None stays None."""
    return None if ms is None else iso_ms(ms)


def parse_result(result: str | None) -> Any:
    """The replica's body as JSON when it parses, else as the string (None: no body)."""
    if result is None:
        return None
    try:
        return json.loads(result)
    except ValueError:
        return result


def status_view(req: QueuedRequest) -> dict[str, Any]:
    """The status endpoint's body for ``req``."""
    return {
        "request_id": req.id,
        "model_id": req.model_id,
        "environment": req.environment,
        "deployment_id": req.deployment_id,
        "status": req.status,
        "created_at": iso(req.created_at_ms),
        "started_at": iso(req.started_at_ms),
        "finished_at": iso(req.finished_at_ms),
        "attempts": req.attempts,
        "webhook": {
            "status": req.webhook_status,
            "attempts": req.webhook_attempts,
            "last_error": req.webhook_last_error,
        },
    }


def webhook_payload(req: QueuedRequest) -> dict[str, Any]:
    """What the webhook receives for a finished request."""
    return {
        "request_id": req.id,
        "model_id": req.model_id,
        "deployment_id": req.deployment_id,
        "environment": req.environment,
        "type": "async_request_completed",
        "time": iso(req.finished_at_ms),
        "data": parse_result(req.result),
        "errors": req.errors,
    }


def backoff_s(options: QueuedOptions, failures: int) -> float:
    """Seconds to wait after the ``failures``-th failed delivery attempt."""
    return options.webhook_backoff_s * options.webhook_backoff_factor ** (failures - 1)


@dataclass
class _Outcome:
    status: str
    response_status: int | None
    result: str | None
    errors: list[dict[str, str]]


def _failed(message: str) -> _Outcome:
    """A FAILED outcome without an answer (``MODEL_PREDICT_ERROR``, ``message``)."""
    return _Outcome("FAILED", None, None, [{"code": "MODEL_PREDICT_ERROR", "message": message}])


class QueuedRequests:
    """Queued (async) requests beside ``gateway``: persisted in ``store`` (the registry database), run
    by a dispatcher loop on the gateway's deployments, their webhooks delivered.

    Args:
        gateway: the gateway whose deployments, gates and replicas the executions share.
        store: the ``async_requests`` table.
        options: the tunables (default ``QueuedOptions()``).
    """

    def __init__(self, gateway: Gateway, store: QueuedStore, options: QueuedOptions | None = None) -> None:
        self.gateway = gateway
        self.options = options or QueuedOptions()
        self.store = store
        self.metrics = QueuedMetrics(gateway.metrics.registry, self._queue_sizes)
        self._view = gateway.view
        self._queued_by_dep: dict[str, int] = {}
        self._async_deps: set[str] = set()  # deployments given an async request since the start
        self._assigned: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._checked_client: httpx.AsyncClient | None = None
        self._webhook_client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        """Requeue the requests a stopped service left IN_PROGRESS, resume pending webhooks and start the
        dispatcher (start the gateway first)."""
        o, egress = self.gateway.options, self.gateway.egress
        timeout = httpx.Timeout(o.upstream_timeout_s, connect=o.connect_timeout_s)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
        self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
        hook_timeout = self.options.webhook_timeout_s
        if egress is None:
            self._checked_client = self._client
            self._webhook_client = httpx.AsyncClient(timeout=hook_timeout)
        else:
            self._checked_client = guarded_client(egress.targets, timeout=timeout, limits=limits)
            self._webhook_client = guarded_client(egress.webhooks, timeout=hook_timeout)
        requeued = await asyncio.to_thread(self.store.recover)
        if requeued:
            log.info("async: %d request(s) in progress at the last stop are queued again", requeued)
        for req in await asyncio.to_thread(self.store.pending_webhooks):
            self._spawn(self._deliver(req.id))
        self._loop_task = asyncio.create_task(self._dispatch_loop())

    async def stop(self) -> None:
        """Stop the dispatcher, executions and deliveries (their state is in the database) and close the
        HTTP clients (stop the gateway after)."""
        tasks = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in {self._webhook_client, self._client, self._checked_client}:
            if client is not None:
                await client.aclose()

    def _client_of(self, replica: Replica) -> httpx.AsyncClient:
        client = self._client if self.gateway.policy_of(replica) is None else self._checked_client
        assert client is not None
        return client

    def wake(self) -> None:
        """Run the dispatcher now (a request arrived, a slot freed)."""
        self._wake.set()

    def _queue_sizes(self) -> Iterable[tuple[tuple[str, ...], int]]:
        # only where async traffic exists: a deployment never given an async request has no queue
        # series (not a 0 that would draw an async graph on every deployment)
        for dep_id, view in sorted(self._view.deployments.items()):
            if dep_id in self._async_deps:
                yield view.labels, self._queued_by_dep.get(dep_id, 0)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _labels(self, dep_id: str | None, req: QueuedRequest) -> DeploymentLabels:
        view = self._view.deployments.get(dep_id or "")
        return view.labels if view else DeploymentLabels(req.model_id, "", dep_id or "", req.environment, "")

    # dispatcher

    async def _dispatch_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self._dispatch()
            except Exception:  # a database hiccup must not stop the queue
                log.exception("async dispatch failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.options.poll_interval_s)

    async def _dispatch(self) -> None:
        store = self.store
        now = self._view.clock_ms()
        for req in await asyncio.to_thread(store.expired, now):
            await self._expire(req, now)
        queued = await asyncio.to_thread(store.queued)
        sizes: dict[str, int] = {}
        full: set[str] = set()
        assigned: dict[str, str] = {}
        for req in queued:
            dep_id = await self._target(req)
            if dep_id is None:
                continue
            assigned[req.id] = dep_id
            self._async_deps.add(dep_id)
            if dep_id in full or not self._has_free_slot(dep_id):
                full.add(dep_id)
                sizes[dep_id] = sizes.get(dep_id, 0) + 1
                continue
            gate = self.gateway.gate(dep_id)
            await gate.enter(None)  # a free slot and no waiter: taken at once, without suspending
            started = self._view.clock_ms()
            if not await asyncio.to_thread(store.claim, req.id, dep_id, started):
                gate.leave()  # cancelled or taken meanwhile
                continue
            excluded = self.gateway.excluded
            excluded[dep_id] = excluded.get(dep_id, 0) + 1
            self._spawn(self._execute(req, dep_id, gate, started))
        self._assigned = assigned
        self._queued_by_dep = sizes

    async def _target(self, req: QueuedRequest) -> str | None:
        """The deployment this QUEUED request will go to (kept while it serves the environment)."""
        serving = await self._view.serving(req.model_id, req.environment)
        weights = serving.weights(self._view.clock_ms()) if serving is not None else []
        if not weights:
            return None
        kept = self._assigned.get(req.id)
        if kept is not None and any(d == kept and share > 0 for d, share in weights):
            return kept
        return choose_deployment(weights)

    def _has_free_slot(self, dep_id: str) -> bool:
        info = self.gateway.settings(dep_id)
        if info is None or info.status == "INACTIVE":
            return False
        gate = self.gateway.gate(dep_id)
        return gate.queued == 0 and gate.in_flight < gate.capacity

    async def _expire(self, req: QueuedRequest, now: int) -> None:
        errors = [
            {
                "code": "REQUEST_EXPIRED",
                "message": f"the request waited {req.max_time_in_queue_s} s (max_time_in_queue_seconds) "
                "in the queue without a free replica",
            }
        ]
        done = await asyncio.to_thread(
            self.store.finish,
            req.id,
            "EXPIRED",
            now,
            response_status=None,
            result=None,
            errors=errors,
            from_status="QUEUED",
        )
        if done and req.webhook_endpoint:
            self._spawn(self._deliver(req.id, self._assigned.get(req.id)))

    # execution

    async def _execute(self, req: QueuedRequest, dep_id: str, gate: Gate, started_ms: int) -> None:
        labels = self._labels(dep_id, req)
        began = time.perf_counter()
        outcome: _Outcome | None = None
        try:
            self.metrics.time_in_queue.labels(*labels).observe(max(0, started_ms - req.created_at_ms) / 1000)
            self.gateway.metrics.incoming.labels(*labels, "true").inc()
            full = await asyncio.to_thread(self.store.get, req.id)
            if full is not None:
                outcome = await self._send_async(full, dep_id, labels, began)
        finally:
            self.gateway.excluded[dep_id] -= 1
            gate.leave(time.perf_counter() - began if outcome else None)
            self.wake()
        store = self.store
        if outcome is None:
            await asyncio.to_thread(store.requeue, req.id)
            return
        now = self._view.clock_ms()
        finished = await asyncio.to_thread(
            store.finish,
            req.id,
            outcome.status,
            now,
            response_status=outcome.response_status,
            result=outcome.result,
            errors=outcome.errors,
        )
        if finished and req.webhook_endpoint:
            await self._deliver(req.id)

    async def _send_async(
        self, req: QueuedRequest, dep_id: str, labels: tuple[str, ...], began: float
    ) -> _Outcome | None:
        """Send to the least busy active replica; None when no replica took the request."""
        tried: set[str] = set()
        body = req.model_input.encode()
        limit = self.options.result_limit_bytes
        while True:
            replica = self.gateway.pick(dep_id, tried)
            if replica is None:
                return None
            first_byte: float | None = None
            inference_s: float | None = None
            chunks: list[bytes] = []
            size = 0
            with self.gateway.outstanding(replica):
                try:
                    async with self._client_of(replica).stream(
                        "POST", f"{replica.base_url}/predict", content=body, headers=_JSON
                    ) as resp:
                        status = resp.status_code
                        inference_s = duration_s(resp.headers.raw, self.gateway.options.server_timing_metric)
                        async for chunk in resp.aiter_bytes():
                            if first_byte is None:
                                first_byte = time.perf_counter() - began
                            size += len(chunk)
                            if size > limit:
                                break
                            chunks.append(chunk)
                except httpx.ConnectError as exc:
                    if (refused := refusal(exc)) is not None:  # the network policy: fails, not requeued
                        self._observe(labels, 502, began, None, len(body), 0)
                        return _failed(f"replica {replica.name!r} of {dep_id!r} is not reachable: {refused}")
                    tried.add(replica.name)
                    continue
                except httpx.HTTPError as exc:
                    self._observe(labels, 502, began, first_byte, len(body), size)
                    return _failed(f"replica {replica.name!r} of {dep_id!r} failed: {exc!r}")
            break
        self._observe(labels, status, began, first_byte, len(body), size, inference_s)
        if size > limit:
            message = f"the replica's answer is over the {limit}-byte result limit; return less"
            return _Outcome("FAILED", status, None, [{"code": "RESPONSE_TOO_LARGE", "message": message}])
        result = b"".join(chunks).decode("utf-8", errors="replace")
        if 200 <= status < 300:
            return _Outcome("SUCCEEDED", status, result, [])
        message = f"the replica answered HTTP {status}"
        return _Outcome("FAILED", status, result, [{"code": "MODEL_PREDICT_ERROR", "message": message}])

    def _observe(
        self,
        labels: tuple[str, ...],
        status: int,
        began: float,
        first_byte: float | None,
        request_bytes: int,
        response_bytes: int,
        inference_s: float | None = None,
    ) -> None:
        elapsed = time.perf_counter() - began
        req_labels = (*labels, str(status), "true")
        m = self.gateway.metrics
        m.requests.labels(*req_labels).inc()
        m.end_to_end.labels(*req_labels).observe(elapsed)
        m.ttfb.labels(*req_labels).observe(elapsed if first_byte is None else first_byte)
        m.request_size.labels(*req_labels).observe(request_bytes)
        m.response_size.labels(*req_labels).observe(response_bytes)
        if inference_s is not None:  # the replica's Server-Timing (gateway.server_timing)
            m.inference.labels(*req_labels).observe(inference_s)

    # webhooks

    async def _deliver(self, request_id: str, waited_for: str | None = None) -> None:
        """Deliver the webhook of a finished request (resuming where a stopped service left it)."""
        store, o = self.store, self.options
        req = await asyncio.to_thread(store.get, request_id)
        if req is None or req.webhook_endpoint is None or req.webhook_status != "PENDING":
            return
        assert self._webhook_client is not None
        labels = self._labels(req.deployment_id or waited_for, req)
        payload = webhook_payload(req)
        attempts, last_error = req.webhook_attempts, req.webhook_last_error
        due_ms = req.webhook_next_at_ms or 0
        while True:
            delay_s = (due_ms - self._view.clock_ms()) / 1000
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            began = time.perf_counter()
            try:
                resp = await self._webhook_client.post(req.webhook_endpoint, json=payload)
                code, error = resp.status_code, None
                if not 200 <= code < 300:
                    error = f"the webhook answered HTTP {code}: {resp.text[:200]}"
            except httpx.HTTPError as exc:
                refused = refusal(exc)
                code = NO_ANSWER_STATUS
                error = (
                    f"no answer from the webhook: {exc!r}"
                    if refused is None
                    else f"the webhook is refused by the network policy: {refused}"
                )
            self.metrics.webhook_requests.labels(*labels, str(code)).inc()
            self.metrics.webhook_latency.labels(*labels).observe(time.perf_counter() - began)
            attempts += 1
            if error is None:
                await asyncio.to_thread(
                    store.webhook_attempted, req.id, "DELIVERED", attempts, last_error, None
                )
                return
            last_error = error
            if attempts >= o.webhook_attempts:
                await asyncio.to_thread(store.webhook_attempted, req.id, "FAILED", attempts, last_error, None)
                return
            due_ms = self._view.clock_ms() + int(backoff_s(o, attempts) * 1000)
            await asyncio.to_thread(store.webhook_attempted, req.id, "PENDING", attempts, last_error, due_ms)
