"""``open_service`` without FastAPI: the parts it opens, and what it closes at exit."""

from __future__ import annotations

import asyncio

from servemetrics.api.service import Service, gateway_target, open_service, scrape_targets
from servemetrics.config import parse_config
from servemetrics.store.memory import MemoryStore
from tests.apptools import org
from tests.query.helpers import at, series, store_with


def _config(tmp_path):
    return parse_config(
        {
            "data_dir": str(tmp_path / "data"),
            "organizations": [org("acme", {"sm-service-key": "PERSONAL"})],
            "models": [
                {
                    "id": "m1",
                    "organization": "acme",
                    "deployments": [
                        {"id": "d1", "replicas": [{"id": "r1", "targets": ["http://h:1/metrics"]}]}
                    ],
                }
            ],
        }
    )


def test_open_service_opens_every_part_and_closes_the_store(tmp_path):
    store = store_with(series("baseten_replicas_active", [(0, 1)], deployment_id="d1"))
    config = _config(tmp_path)

    async def run() -> Service:
        async with open_service(config, clock=lambda: at(60), store=store) as service:
            assert (service.config, service.store, service.clock()) == (config, store, at(60))
            assert [
                m.id
                for m in service.registry.tenancy.list_models(
                    service.registry.tenancy.organization_id("acme")
                )
            ] == ["m1"]
            assert service.gateway is not None and service.scraper is not None
            assert store.stats().series == 1
            return service

    service = asyncio.run(run())
    assert (tmp_path / "data").is_dir()
    assert store.stats().series == 0  # closed (MemoryStore.close drops everything)
    targets = scrape_targets(service.registry, (gateway_target(),))
    assert [t.url for t in targets] == ["http://gateway.in-process/gateway/metrics", "http://h:1/metrics"]


def test_open_service_without_scraper_and_gateway(tmp_path):
    async def run() -> Service:
        async with open_service(
            _config(tmp_path), scrape=False, gateway=False, store=MemoryStore()
        ) as service:
            return service

    service = asyncio.run(run())
    assert service.scraper is None and service.gateway is None
