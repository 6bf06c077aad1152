"""Replica health: poll each serving replica's ``GET /health`` every ``interval_s`` seconds.

A replica is *starting* until a check answers 2xx, then *active* (routable) while checks pass. An
active replica whose ``failures`` consecutive checks fail (an error status, a refused connection, or no
answer within ``timeout_s``) stops receiving requests at once and is marked FAILED in the registry,
which records REPLICA_TERMINATED with the reason; its targets are then no longer scraped. A replica
that was never healthy stays starting (it may be loading its model). A replica STARTING in the
registry becomes ACTIVE there at its first good check, which also ends its open startup attempt
(``registry.startups``: registered -> first healthy check is its READINESS). A replica terminated through
the API leaves the registry's serving set, so its loop stops at the next refresh.

A FAILED replica (also one stored FAILED before this process started) is still checked, at the delays
of ``Backoff`` (1 s doubling to 60 s by default); at its first good check it becomes ACTIVE in the
registry (REPLICA_RECOVERED recorded, ``status: ACTIVE``), so the next refresh serves it again:
scraped, checked every ``interval_s`` and routed to once that loop's first check passes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import httpx

from servemetrics.gateway.state import DeploymentView, Replica
from servemetrics.keyed_loops import KeyedLoops
from servemetrics.registry import Registry, RegistryError
from servemetrics.types import escape_log, redact_url

log = logging.getLogger(__name__)
ReplicaKey = tuple[str, str]
"""(deployment id, replica id)."""
RECOVERED = "GET /health answered 2xx again"
"""The ``reason`` of the event of a FAILED replica healthy again."""


@dataclass(frozen=True)
class Backoff:
    """The delays (seconds) between checks of a FAILED replica: ``first_s``, then doubling, at most
    ``max_s`` (exponential backoff, as Kubernetes' CrashLoopBackOff: a replica down for long is asked
    about once a ``max_s``, one back soon is found soon)."""

    first_s: float = 1.0
    max_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.first_s <= self.max_s:
            raise ValueError(f"backoff needs 0 < first_s <= max_s, not {self.first_s} and {self.max_s}")

    def delays(self) -> Iterator[float]:
        """``first_s, 2 first_s, 4 first_s, …`` capped at ``max_s``, without end."""
        delay = self.first_s
        while True:
            yield delay
            delay = min(delay * 2, self.max_s)


class Health:
    """Health loops of the serving replicas and their verdicts.

    Args:
        client: HTTP client for the checks.
        registry: where verdicts are recorded.
        on_change: called (in the event loop) when a replica becomes active or fails.
        interval_s: seconds between two checks of one replica.
        timeout_s: seconds a check may take.
        failures: consecutive failed checks that fail an active replica.
        client_of: the client for a replica's checks (default: ``client``), e.g. one whose connections
            the network policy checks (``netpolicy.guarded_client``).
        backoff: the delays between checks of a FAILED replica.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        registry: Registry,
        on_change: Callable[[], None],
        interval_s: float = 2.0,
        timeout_s: float = 1.0,
        failures: int = 2,
        client_of: Callable[[Replica], httpx.AsyncClient] | None = None,
        backoff: Backoff = Backoff(),
    ) -> None:
        self._client = client
        self._client_of = client_of or (lambda _: client)
        self._registry = registry
        self._on_change = on_change
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.failures = failures
        self.backoff = backoff
        self.active: set[ReplicaKey] = set()
        self._loops: KeyedLoops[tuple[str, str, str, bool]] = KeyedLoops()

    def is_active(self, replica: Replica) -> bool:
        """True while the replica passes its checks (routable)."""
        return (replica.deployment_id, replica.name) in self.active

    def sync(self, views: Mapping[str, DeploymentView], failed: Mapping[str, DeploymentView] = {}) -> None:
        """Start loops for new replicas (``views``: serving; ``failed``: FAILED in the registry, checked
        with backoff), stop those of replicas in neither any more (or now in the other)."""
        wanted = {
            (r.deployment_id, r.name, r.base_url, False): functools.partial(self._loop, r)
            for v in views.values()
            for r in v.replicas
        } | {
            (r.deployment_id, r.name, r.base_url, True): functools.partial(self._recover, r)
            for v in failed.values()
            for r in v.replicas
        }
        for gone in self._loops.sync(wanted):
            if not gone[3]:
                self.active.discard(gone[:2])

    async def stop(self) -> None:
        """Cancel every loop."""
        await self._loops.stop()

    async def check(self, replica: Replica) -> str | None:
        """One check: None when healthy, else what went wrong (the URL's password shown as ``***``: the
        text goes into the REPLICA_TERMINATED event, which read keys see, and the log)."""
        shown = redact_url(replica.base_url)
        try:
            client = self._client_of(replica)
            resp = await client.get(f"{replica.base_url}/health", timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            detail = str(exc).replace(replica.base_url, shown)
            return f"GET {shown}/health failed: {type(exc).__name__} {detail}".strip()
        if resp.is_success:
            return None
        return f"GET {shown}/health answered {resp.status_code}"

    async def _loop(self, replica: Replica) -> None:
        key = (replica.deployment_id, replica.name)
        failed = 0
        while True:
            problem = await self.check(replica)
            if problem is None:
                failed = 0
                if key not in self.active:
                    self.active.add(key)
                    self._on_change()
                    await self._healthy(replica)
                    if replica.status == "STARTING":
                        await self._record(replica, "ACTIVE", None, ("STARTING",))
            elif key in self.active:
                failed += 1
                if failed >= self.failures:
                    self.active.discard(key)
                    self._on_change()
                    log.warning(
                        "replica %s of %s failed: %s",
                        replica.name,
                        replica.deployment_id,
                        escape_log(problem),
                    )
                    await self._record(replica, "FAILED", problem, ("STARTING", "ACTIVE"))
                    return
            await asyncio.sleep(self.interval_s)

    async def _healthy(self, replica: Replica) -> None:
        """The replica passed a check after not being active: the end of its startup attempt if one is
        open (``Startups.healthy``, at the registry clock's now: the clock of the replica's registration)."""
        try:
            await asyncio.to_thread(self._registry.startups.healthy, replica.deployment_id, replica.name)
        except RegistryError as exc:  # pragma: no cover - deleted meanwhile
            log.info("could not record the startup of %s: %s", replica.name, escape_log(str(exc)))

    async def _recover(self, replica: Replica) -> None:
        """Check a FAILED replica at the backoff's delays; at the first good check record it ACTIVE."""
        for delay in self.backoff.delays():
            await asyncio.sleep(delay)
            if await self.check(replica) is None:
                log.info("replica %s of %s is healthy again", replica.name, replica.deployment_id)
                await self._record(replica, "ACTIVE", RECOVERED, ("FAILED",))
                return

    async def _record(
        self, replica: Replica, status: str, reason: str | None, only_from: tuple[str, ...]
    ) -> None:
        """Record ``status`` in the registry if the replica's status there is one of ``only_from`` (one
        terminated meanwhile stays so)."""
        try:
            await asyncio.to_thread(
                functools.partial(
                    self._registry.deployments.set_replica_status,
                    replica.model_id,
                    replica.deployment_id,
                    replica.name,
                    status,
                    reason,
                    only_from=only_from,
                )
            )
        except RegistryError as exc:  # deleted meanwhile: nothing left to record
            log.info("could not record %s for replica %s: %s", status, replica.name, escape_log(str(exc)))
        self._on_change()
