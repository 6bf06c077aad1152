"""Gateway parts in process: admission, desired replicas, traffic shares, Host parsing, base URLs."""

from __future__ import annotations

import asyncio

import pytest

from servemetrics.api.errors import ApiError
from servemetrics.api.routes.gateway import is_inference_path, model_from_host
from servemetrics.gateway import REJECT_ON_FULL, desired_replicas
from servemetrics.gateway.backpressure import Full, Gate
from servemetrics.gateway.state import Serving, base_url
from servemetrics.registry import AutoscalingSettings


def test_gate_queues_fifo_and_rejects_when_told():
    async def run() -> list[int]:
        gate = Gate(capacity=1, queue_limit=2)
        order: list[int] = []
        await gate.enter(None)

        async def waiter(i: int) -> None:
            await gate.enter(None)
            order.append(i)

        tasks = [asyncio.create_task(waiter(i)) for i in range(2)]
        await asyncio.sleep(0)
        assert (gate.in_flight, gate.queued) == (1, 2)
        with pytest.raises(Full):
            await gate.enter(None)  # queue full
        with pytest.raises(Full) as rejected:
            await gate.enter(REJECT_ON_FULL)
        assert rejected.value.retry_after_s == 1
        gate.leave(3.2)
        await asyncio.sleep(0)
        gate.leave()
        await asyncio.gather(*tasks)
        assert gate.retry_after_s() == 1  # 0.1 x 3.2 s
        return order

    assert asyncio.run(run()) == [0, 1]


def test_gate_timeout_frees_the_queue_slot():
    async def run() -> None:
        gate = Gate(capacity=0, queue_limit=5, queue_timeout_s=0.05)
        with pytest.raises(Full, match="waited 0.05 s"):
            await gate.enter(None)
        assert (gate.in_flight, gate.queued) == (0, 0)
        gate.set_capacity(1)
        await gate.enter(None)
        assert gate.in_flight == 1

    asyncio.run(run())


@pytest.mark.parametrize(
    ("concurrency", "settings", "expected"),
    [
        (0, AutoscalingSettings(min_replica=0, max_replica=5), 0),
        (7, AutoscalingSettings(min_replica=0, max_replica=5, concurrency_target=1), 5),
        (7, AutoscalingSettings(min_replica=1, max_replica=20, concurrency_target=4), 3),  # 7 / 2.8
        (14, AutoscalingSettings(max_replica=20, concurrency_target=4, target_utilization_percentage=50), 7),
        (0, AutoscalingSettings(min_replica=2, max_replica=4), 2),
    ],
)
def test_desired_replicas(concurrency, settings, expected):
    assert desired_replicas(concurrency, settings) == expected


_TOKENS = AutoscalingSettings(
    min_replica=1, max_replica=10, target_utilization_percentage=80, target_in_flight_tokens=1000
)


@pytest.mark.parametrize(
    ("concurrency", "settings", "tokens", "expected"),
    [
        (0, _TOKENS, 2400.0, 3),  # 2400 tokens / (1000 x 80 %) = 3, whatever the concurrency
        (9, _TOKENS, 1600.0, 2),  # exactly 2 (not 3 from float error); concurrency 9 would ask 10
        (0, _TOKENS, 0.0, 1),  # no load: min_replica
        (0, _TOKENS, 50_000.0, 10),  # 62.5 clamped to max_replica
        (4, _TOKENS, None, 5),  # no token series: concurrency 4 / (1 x 80 %) = 5
        (2, AutoscalingSettings(max_replica=10, target_utilization_percentage=100), 5000.0, 2),  # unset
    ],
)
def test_desired_replicas_on_in_flight_tokens(concurrency, settings, tokens, expected):
    assert desired_replicas(concurrency, settings, tokens) == expected


def test_serving_weights_follow_the_timeline_and_the_percent():
    s = Serving(((0, frozenset({"d1"})), (1000, frozenset({"d1", "d2"}))), "d2", "d1", 30)
    assert s.weights(999) == [("d1", 1.0)]
    assert s.weights(1000) == [("d1", pytest.approx(0.7)), ("d2", pytest.approx(0.3))]
    assert Serving(((0, frozenset()),), None, None, 0).weights(5) == []


def test_model_from_host():
    assert model_from_host("model-abc.api.example.com:8321") == "abc"
    for bad in ("abc.example.com", "model-", "model-.x", "localhost:8321"):
        with pytest.raises(ApiError) as err:
            model_from_host(bad)
        assert err.value.status == 404


def test_base_url_and_inference_paths():
    assert base_url("http://10.0.0.5:8000/metrics?x=1") == "http://10.0.0.5:8000"
    assert is_inference_path("/v1/models/m/environments/p/predict")
    assert is_inference_path("/v1/models/m/environments/p/sync/a/b")
    assert not is_inference_path("/v1/models/m/environments/p/pause_promotion")


def test_a_failed_health_check_does_not_show_the_url_password():
    # the text becomes the REPLICA_TERMINATED event's reason, which read-only keys can see
    import asyncio

    import httpx

    from servemetrics.gateway.health import Health
    from servemetrics.gateway.state import Replica
    from tests.processes import free_port

    url = f"http://scraper:s3cretpw@127.0.0.1:{free_port()}"  # nothing listens there

    async def check() -> str | None:
        async with httpx.AsyncClient() as client:
            health = Health(client, None, lambda: None)  # type: ignore[arg-type]  # check() uses neither
            return await health.check(Replica("m1", "d1", "d1-r1", url, "ACTIVE"))

    problem = asyncio.run(check())
    assert problem is not None and problem.startswith("GET http://scraper:***@127.0.0.1:")
    assert "s3cretpw" not in problem and "ConnectError" in problem


def test_deployment_labels_are_the_dep_label_set():
    from servemetrics.gateway.metrics import DeploymentLabels
    from servemetrics.labels import DEPLOYMENT_LABELS

    assert DeploymentLabels._fields == DEPLOYMENT_LABELS


def test_registry_writes_move_the_version_and_the_view_drops_its_cache(tmp_path):
    from servemetrics.gateway.state import RegistryView
    from servemetrics.registry import Registry

    registry = Registry.open(f"sqlite:///{tmp_path / 'registry.sqlite3'}")
    woken: list[int] = []
    registry.listeners.append(lambda: woken.append(registry.version))
    registry.tenancy.ensure_organization("acme")
    assert registry.version == 1 and woken == [1]
    with registry.transaction() as tx:  # counted once, when it commits
        tx.tenancy.ensure_model("m1", "llama", "acme")
        tx.tenancy.ensure_model("m2", "other", "acme")
        assert registry.version == 1
    assert registry.version == 2 and woken == [1, 2]
    registry.tenancy.model("m1", None)  # a read counts nothing
    assert registry.version == 2

    async def run() -> None:
        view = RegistryView(registry, lambda: 0, ttl_s=60)
        view.watch()
        org = registry.tenancy.organization_id("acme")
        assert org is not None
        first = await view.model("m1", org)
        assert first is not None and first.name == "llama"
        await asyncio.to_thread(registry.tenancy.ensure_model, "m1", "renamed", "acme")  # a write in a thread
        await asyncio.sleep(0)
        assert view.changed.is_set()  # the refresh is woken
        again = await view.model("m1", org)
        assert again is not None and again.name == "renamed"  # the 60 s cache entry was dropped
        view.unwatch()

    asyncio.run(run())
    registry.close()
