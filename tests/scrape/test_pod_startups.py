"""The scraper hands a replica's pod timestamps to ``on_pods`` (a real HTTP server serving the
kube-state-metrics fixture ``tests/fixtures/kube_state_startups.prom``), only for the replica's own pod."""

from __future__ import annotations

import anyio
import httpx

from servemetrics.ingest.pod_times import PodTimes
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.ingest.test_pod_times import CREATED_MS, KSM
from tests.scrape.test_scraper import Exporter, exporter  # noqa: F401 (the fixture)

POD = labels_of({"model_id": "m1", "model_name": "M", "deployment_id": "d1", "replica": "llm-7f9c-x2k4p"})


def _scrape(target: Target, ts: int) -> list[tuple[Target, list[PodTimes], int]]:
    seen: list[tuple[Target, list[PodTimes], int]] = []

    async def go() -> None:
        async with httpx.AsyncClient() as client:
            scraper = Scraper(client, MemoryStore().append, on_pods=lambda *args: seen.append(args))
            await scraper.scrape_once(target, ts)

    anyio.run(go)
    return seen


def test_on_pods_gets_the_replicas_pod_with_the_scrape_time(exporter: Exporter) -> None:  # noqa: F811
    exporter.body = KSM.read_bytes()
    target = Target(exporter.url, POD)
    ((got_target, pods, ts),) = _scrape(target, CREATED_MS + 600_000)
    assert (got_target, ts, [p.uid for p in pods]) == (target, CREATED_MS + 600_000, ["5b1e0c3a-0001"])
    assert pods[0].marks["ready"] - pods[0].marks["created"] == 164_500


def test_no_call_for_a_replica_without_a_pod_or_a_target_without_a_replica(exporter: Exporter) -> None:  # noqa: F811
    exporter.body = KSM.read_bytes()
    other = labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1"})
    assert _scrape(Target(exporter.url, other), CREATED_MS) == []
    assert _scrape(Target(exporter.url, ()), CREATED_MS) == []
