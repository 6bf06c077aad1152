"""Issue 13 part 6: with ``target_in_flight_tokens`` set, the gateway's ``baseten_replicas_desired``
follows the deployment's in-flight tokens (``baseten_llm_in_flight_tokens`` in the store, read as the
metrics API answers it in CURRENT mode), back to concurrency when the field is unset or no tokens are
known. The real service (registry, store, gateway loops) in process; nothing is routed."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from servemetrics.api.service import open_service
from servemetrics.gateway import GatewayOptions
from tests.gateway.inprocess import two_deployments_config
from tests.query.helpers import at, series, store_with

TOKENS = "baseten_llm_in_flight_tokens"


def test_desired_replicas_follow_in_flight_tokens(tmp_path: Path) -> None:
    # d1: two workers of one replica report 1500 and 900 in-flight tokens (latest samples, 30 s before
    # now): 2400 in all. d2 has no token series.
    store = store_with(
        series(TOKENS, [(0, 1000), (30, 1500)], deployment_id="d1", replica="r1", pod_hash="a"),
        series(TOKENS, [(0, 300), (30, 900)], deployment_id="d1", replica="r1", pod_hash="b"),
    )
    options = GatewayOptions(tokens_interval_s=0.0, health_interval_s=60.0)

    async def run() -> None:
        async with open_service(
            two_deployments_config(tmp_path),
            scrape=False,
            clock=lambda: at(60),
            store=store,
            gateway_options=options,
        ) as service:
            assert service.gateway is not None
            deployments = service.registry.deployments

            async def desired(dep_id: str, want: int) -> None:
                deadline = time.monotonic() + 20
                got = None
                while time.monotonic() < deadline:
                    got = {g.labels.deployment_id: g.desired for g in service.gateway.gauges()}.get(dep_id)
                    if got == want:
                        return
                    await anyio.sleep(0.05)
                raise AssertionError(f"{dep_id}: desired {got}, want {want}")

            settings = {"min_replica": 1, "max_replica": 10, "target_utilization_percentage": 80}
            deployments.update_autoscaling("m1", "d1", {**settings, "target_in_flight_tokens": 1000})
            deployments.update_autoscaling("m1", "d2", {**settings, "target_in_flight_tokens": 1000})
            await desired("d1", 3)  # ceil(2400 / (1000 x 80 %)) = 3
            await desired("d2", 1)  # no tokens known: concurrency 0 -> min_replica 1
            deployments.update_autoscaling("m1", "d1", {"target_in_flight_tokens": 500})
            await desired("d1", 6)  # ceil(2400 / 400) = 6
            deployments.update_autoscaling("m1", "d1", {"target_in_flight_tokens": None})
            await desired("d1", 1)  # unset: concurrency 0 -> min_replica 1

    anyio.run(run)
