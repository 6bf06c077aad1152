"""Issue 15: the gateway exports ``baseten_replicas_desired`` only for a deployment whose autoscaling
settings the service knows (set through the API), and ``baseten_async_queue_size`` only where async
traffic exists. Without settings the platform's defaults (min 0, max 1) read "desired 0" beside 2
active replicas, and a queue size of 0 drew async graphs on every deployment. The real service
(registry, store, gateway loops) in process; nothing is routed."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from prometheus_client import generate_latest

from servemetrics.api.service import open_service
from servemetrics.gateway import GatewayOptions
from servemetrics.store.memory import MemoryStore
from tests.gateway.inprocess import two_deployments_config
from tests.query.helpers import at


def _known(service, deployment_id: str) -> bool:
    info = service.registry.deployments.deployment("m1", deployment_id)
    assert info is not None
    return info.autoscaling_known


def _exported(text: str, name: str) -> set[str]:
    """The ``deployment_id`` values of the samples of ``name`` in an exposition ``text``."""
    out = set()
    for line in text.splitlines():
        if line.startswith(name + "{"):
            out.add(line.split('deployment_id="', 1)[1].split('"', 1)[0])
    return out


def test_desired_replicas_only_with_known_settings_and_no_queue_without_async(tmp_path: Path) -> None:
    options = GatewayOptions(health_interval_s=60.0)

    async def run() -> None:
        async with open_service(
            two_deployments_config(tmp_path),
            scrape=False,
            clock=lambda: at(60),
            store=MemoryStore(),
            gateway_options=options,
        ) as service:
            gateway = service.gateway
            assert gateway is not None
            registry = service.registry.deployments
            assert not _known(service, "d1")  # the configuration declares no settings
            # min 2: the concurrency is 0, so desired = min_replica = 2 once d1's settings are known
            assert registry.update_autoscaling("m1", "d1", {"min_replica": 2, "max_replica": 4}) == "ACCEPTED"
            assert _known(service, "d1") and not _known(service, "d2")
            deadline = time.monotonic() + 20
            desired: dict[str, int | None] = {}
            while time.monotonic() < deadline:
                desired = {g.labels.deployment_id: g.desired for g in gateway.gauges()}
                if desired == {"d1": 2, "d2": None}:
                    break
                await anyio.sleep(0.05)
            assert desired == {"d1": 2, "d2": None}
            text = generate_latest(gateway.metrics.registry).decode()
            assert _exported(text, "baseten_replicas_desired") == {"d1"}
            assert _exported(text, "baseten_replicas_active") == {"d1", "d2"}  # the other gauges stay
            assert _exported(text, "baseten_async_queue_size") == set()  # no async request yet

    anyio.run(run)


def test_setting_the_defaults_explicitly_makes_them_known(tmp_path: Path) -> None:
    async def run() -> None:
        async with open_service(
            two_deployments_config(tmp_path), scrape=False, store=MemoryStore(), gateway=False
        ) as service:
            registry = service.registry.deployments
            assert registry.update_autoscaling("m1", "d2", {"min_replica": 0}) == "UNCHANGED"
            assert _known(service, "d2")

    anyio.run(run)
