"""What the gateway knows of the registry, never more than ``ttl_s`` (default 1 s) old.

- The serving replicas of every deployment (from ``Registry.list_targets``), refreshed in the
  background, and the FAILED ones (still health-checked, never routed to). A replica's serving base URL
  is its first target of kind ``replica`` (in the order declared) with the path stripped:
  ``http://10.0.0.5:8000/metrics`` -> ``http://10.0.0.5:8000``.
- Per environment: which deployments serve it over the next minute (the promotion timeline, so an
  instant promotion scheduled for a later instant switches at that instant) and the running
  promotion's percent; per deployment: its settings; per key: who it is. Read on demand, cached.

Every cached answer is dropped when the registry's ``version`` (which grows after each write) is not the
one it was read at, so a write through this process (a promotion, a terminated replica, new settings)
is seen by the next request; ``watch()`` also wakes the background refresh at once (``changed``).
``invalidate()`` drops every cached answer too (the gateway calls it when a replica's health changes).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from servemetrics.gateway.metrics import DeploymentLabels
from servemetrics.registry import DeploymentInfo, KeyInfo, ModelInfo, Registry, TargetInfo
from servemetrics.registry.keys import digest
from servemetrics.registry.model_apis import ModelApiInfo

T = TypeVar("T")
HORIZON_MS = 60_000
"""How far ahead (ms) the cached promotion timeline reaches."""
CHECKED_STATUSES = ("STARTING", "ACTIVE", "FAILED")
"""The registry statuses of the replicas the gateway health-checks (TERMINATED ones: never)."""


@dataclass(frozen=True)
class Replica:
    """A replica the gateway checks (``status``: the registry's STARTING or ACTIVE: it may route to it
    once healthy; FAILED: checked with backoff only)."""

    model_id: str
    deployment_id: str
    name: str
    base_url: str
    status: str


@dataclass(frozen=True)
class DeploymentView:
    """A deployment's serving replicas and the DEP labels of its series."""

    labels: DeploymentLabels
    replicas: tuple[Replica, ...]


@dataclass(frozen=True)
class Serving:
    """Who serves an environment: ``timeline`` of (instant ms, deployment ids) and the running
    rolling promotion (``new`` gets ``percent`` % of the traffic, ``previous`` the rest)."""

    timeline: tuple[tuple[int, frozenset[str]], ...]
    new: str | None
    previous: str | None
    percent: int

    def weights(self, now_ms: int) -> list[tuple[str, float]]:
        """Deployment id -> share of traffic (0-1) at ``now_ms``; empty when nothing serves."""
        instants = [at for at, _ in self.timeline]
        i = bisect.bisect_right(instants, now_ms) - 1
        serving = sorted(self.timeline[max(i, 0)][1]) if self.timeline else []
        if len(serving) == 2 and self.new in serving and self.previous in serving:
            share = self.percent / 100
            return [(self.previous, 1 - share), (self.new, share)]
        return [(d, 1 / len(serving)) for d in serving]


def base_url(url: str) -> str:
    """``scheme://host:port`` of a target URL (the path, query and fragment stripped)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def deployment_views(targets: list[TargetInfo]) -> dict[str, DeploymentView]:
    """Deployment id -> its view, from the registry's scrape targets (first ``replica`` target wins)."""
    out: dict[str, DeploymentView] = {}
    seen: set[tuple[str, str]] = set()
    for t in targets:
        if t.kind != "replica" or (t.deployment_id, t.replica) in seen:
            continue
        seen.add((t.deployment_id, t.replica))
        labels = DeploymentLabels(t.model_id, t.model_name, t.deployment_id, t.environment, t.rollout_phase)
        replica = Replica(t.model_id, t.deployment_id, t.replica, base_url(t.url), t.replica_status)
        view = out.get(t.deployment_id)
        out[t.deployment_id] = DeploymentView(labels, (view.replicas if view else ()) + (replica,))
    return out


class RegistryView:
    """Cached reads of the registry for the request path (registry calls run in worker threads)."""

    def __init__(self, registry: Registry, clock_ms: Callable[[], int], ttl_s: float = 1.0) -> None:
        self.registry = registry
        self.clock_ms = clock_ms
        self.ttl_s = ttl_s
        self.deployments: dict[str, DeploymentView] = {}
        self.failed: dict[str, DeploymentView] = {}
        """Deployment id -> its FAILED replicas (health-checked with backoff, not routed to)."""
        self._cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._version = registry.version
        self._listener: Callable[[], None] | None = None
        self.changed = asyncio.Event()
        """Set when the registry changed (or ``invalidate()``): the gateway's refresh loop waits on it."""

    def invalidate(self) -> None:
        """Forget every cached answer; the background refresh runs at once."""
        self._cache.clear()
        self.changed.set()

    def watch(self) -> None:
        """Set ``changed`` after each write to the registry, from whichever thread wrote (call it inside
        the event loop; ``unwatch()`` stops it)."""
        loop = asyncio.get_running_loop()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the event loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self.changed.set)

        self._listener = wake
        self.registry.listeners.append(wake)

    def unwatch(self) -> None:
        """Stop setting ``changed`` on registry writes."""
        if self._listener is not None:
            with contextlib.suppress(ValueError):
                self.registry.listeners.remove(self._listener)
            self._listener = None

    async def refresh_deployments(self) -> dict[str, DeploymentView]:
        """Re-read the serving replicas of every deployment (returned) and the FAILED ones (``failed``)."""
        targets = await asyncio.to_thread(self.registry.list_targets, CHECKED_STATUSES)
        failed = [t for t in targets if t.replica_status == "FAILED"]
        self.deployments = deployment_views([t for t in targets if t.replica_status != "FAILED"])
        self.failed = deployment_views(failed)
        return self.deployments

    async def _cached(self, key: tuple[Any, ...], load: Callable[[], Awaitable[T]]) -> T:
        version = self.registry.version
        if version != self._version:  # the registry changed since the cached answers were read
            self._version = version
            self._cache.clear()
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            value: T = hit[1]
            return value
        value = await load()
        if self.registry.version == version:  # else it may predate the change: not kept
            self._cache[key] = (now + self.ttl_s, value)
        return value

    async def key(self, raw_key: str) -> KeyInfo | None:
        """The stored key ``raw_key`` is, or None."""
        registry = self.registry
        return await self._cached(
            ("key", digest(raw_key)), lambda: asyncio.to_thread(registry.tenancy.authenticate, raw_key)
        )

    async def model(self, model_id: str, organization_id: int) -> ModelInfo | None:
        """Model ``model_id`` of the organization, or None."""
        registry = self.registry
        return await self._cached(
            ("model", model_id, organization_id),
            lambda: asyncio.to_thread(registry.tenancy.model, model_id, organization_id),
        )

    async def model_api(self, organization_id: int, name: str) -> ModelApiInfo | None:
        """The organization's Model API ``name``, or None (docs/model-apis.md)."""
        registry = self.registry
        return await self._cached(
            ("model_api", organization_id, name),
            lambda: asyncio.to_thread(registry.model_apis.model_api, organization_id, name),
        )

    async def deployment(self, model_id: str, deployment_id: str) -> DeploymentInfo | None:
        """Deployment ``deployment_id`` of the model (``production`` / ``development``: that
        environment's current deployment), or None."""
        return await self._cached(
            ("deployment", model_id, deployment_id),
            lambda: asyncio.to_thread(self._deployment, model_id, deployment_id),
        )

    def _deployment(self, model_id: str, deployment_id: str) -> DeploymentInfo | None:
        if deployment_id in ("production", "development"):
            env = self.registry.environments.environment(model_id, deployment_id)
            deployment_id = env.current_deployment_id or "" if env else ""
        return self.registry.deployments.deployment(model_id, deployment_id) if deployment_id else None

    async def serving(self, model_id: str, env_name: str) -> Serving | None:
        """Who serves the environment from now on (None: no such environment)."""
        return await self._cached(
            ("serving", model_id, env_name), lambda: asyncio.to_thread(self._serving, model_id, env_name)
        )

    def _serving(self, model_id: str, env_name: str) -> Serving | None:
        env = self.registry.environments.environment(model_id, env_name)
        if env is None:
            return None
        now = self.clock_ms()
        timeline = self.registry.environments.serving_timeline(model_id, env_name, now, now + HORIZON_MS)
        running = env.in_progress_promotion
        if running is None:
            return Serving(tuple(timeline), None, None, 0)
        return Serving(
            tuple(timeline),
            running.deployment_id,
            running.previous_deployment_id,
            running.percent_traffic_to_new_version,
        )


def choose_deployment(weights: list[tuple[str, float]]) -> str:
    """A deployment id drawn with the given shares (``Serving.weights``: shares 0-1 summing to 1; not
    empty)."""
    if len(weights) == 1:
        return weights[0][0]
    x = random.random()
    for dep_id, share in weights:
        if x < share:
            return dep_id
        x -= share
    return next(d for d, s in reversed(weights) if s > 0)
