"""Case C13 (cases/counters.md) through the real path: one container, one value. A replica's CPU and working
set come from one preferred source (cAdvisor over kubelet ``/metrics/resource`` over the process's own
``process_*``), never summed across views of the same container (docs/query-semantics.md).

Two targets of one replica are scraped by the real ``Scraper`` (bodies from an ``httpx.MockTransport``)
into a ``MemoryStore`` and a ``DuckDBStore`` and read by ``build_plan`` / ``execute`` as the API answers.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from servemetrics.ingest.scraper import Target
from servemetrics.store.base import Store
from servemetrics.types import labels_of
from tests.scrape.answers import summary
from tests.scrape.test_continuity import REPLICA, scrape

CPU = "baseten_container_cpu_usage_seconds_total"
MEM = "baseten_container_cpu_memory_working_set_bytes"
R1 = labels_of(REPLICA)
CADVISOR_T = Target("https://10.0.0.2:10250/metrics/cadvisor", R1)
RESOURCE_T = Target("https://10.0.0.2:10250/metrics/resource", R1)
PROCESS_T = Target("http://10.0.0.7:8080/metrics", R1)

_ID = 'id="/kubepods/burstable/pod1/c1",'
_POD = 'namespace="ns",pod="p1",container="app"'


def cadvisor(cpu: float, mem: float) -> str:
    return (
        "# TYPE container_cpu_usage_seconds_total counter\n"
        f'container_cpu_usage_seconds_total{{{_ID}{_POD},cpu="total"}} {cpu}\n'
        "# TYPE container_memory_working_set_bytes gauge\n"
        f"container_memory_working_set_bytes{{{_ID}{_POD}}} {mem}\n"
    )


def resource(cpu: float, mem: float) -> str:
    return (
        "# TYPE container_cpu_usage_seconds_total counter\n"
        f"container_cpu_usage_seconds_total{{{_POD}}} {cpu}\n"
        "# TYPE container_memory_working_set_bytes gauge\n"
        f"container_memory_working_set_bytes{{{_POD}}} {mem}\n"
    )


def process(cpu: float, mem: float) -> str:
    return (
        "# TYPE process_cpu_seconds_total counter\n"
        f"process_cpu_seconds_total {cpu}\n"
        "# TYPE process_resident_memory_bytes gauge\n"
        f"process_resident_memory_bytes {mem}\n"
    )


def both(store: Store, first: tuple[Target, str, str], second: tuple[Target, str, str]) -> None:
    """Scrape two targets of replica r1 at T0 and T0 + 60 s: ``(target, body at T0, body at T0 + 60)``."""
    scrapes: list[tuple[float, str]] = []
    targets: list[Target] = []
    for seconds in (0, 60):
        for target, at_0, at_60 in (first, second):
            scrapes.append((seconds, at_0 if seconds == 0 else at_60))
            targets.append(target)
    scrape(store, scrapes, targets)


def cpu_and_mem(store: Store) -> tuple[float | None, float | None]:
    """CPU cores and working set of a SUMMARY over ``[T0, T0 + 60 s)``: the delta between the two
    scrapes is spread over ``(T0, T0 + 60 s]``, all inside; the gauge's sample at T0."""
    (cores,) = summary(store, CPU, 0, 60)
    (working_set,) = summary(store, MEM, 0, 60)
    return cores, working_set


def test_c13_cadvisor_and_resource_count_once(store: Store) -> None:
    """Both kubelet endpoints describe the one container: 36 CPU-seconds in 60 s = 0.6 cores, 1.2e9 B
    (before: the cadvisor and kubelet_resource series were summed in the replica, 1.2 cores / 2.4e9)."""
    both(
        store,
        (CADVISOR_T, cadvisor(200, 1.2e9), cadvisor(236, 1.2e9)),
        (RESOURCE_T, resource(200, 1.2e9), resource(236, 1.2e9)),
    )
    cores, working_set = cpu_and_mem(store)
    assert cores == pytest.approx(0.6)
    assert working_set == pytest.approx(1.2e9)


def test_c13_cadvisor_preferred_over_process(store: Store) -> None:
    """The model server's own process counters are another view of the same container; cAdvisor wins
    (the process' numbers differ, so a mean would show too)."""
    both(
        store,
        (CADVISOR_T, cadvisor(200, 1.2e9), cadvisor(236, 1.2e9)),
        (PROCESS_T, process(50, 0.9e9), process(80, 0.9e9)),
    )
    cores, working_set = cpu_and_mem(store)
    assert cores == pytest.approx(0.6)
    assert working_set == pytest.approx(1.2e9)


def test_c13_process_alone_still_answers(store: Store) -> None:
    scrape(store, [(0, process(50, 0.9e9)), (60, process(80, 0.9e9))], [PROCESS_T, PROCESS_T])
    cores, working_set = cpu_and_mem(store)
    assert cores == pytest.approx(0.5)
    assert working_set == pytest.approx(0.9e9)


def test_c13_resource_preferred_over_process(store: Store) -> None:
    both(
        store,
        (RESOURCE_T, resource(200, 1.2e9), resource(236, 1.2e9)),
        (PROCESS_T, process(50, 0.9e9), process(80, 0.9e9)),
    )
    assert cpu_and_mem(store) == (pytest.approx(0.6), pytest.approx(1.2e9))


def test_c13_each_replica_takes_its_own_best_source(store: Store) -> None:
    """r1 has cAdvisor and process, r2 only process: the mean across replicas is of r1's cAdvisor value
    and r2's process value (never r1's two views averaged or summed)."""
    r2 = labels_of({**REPLICA, "replica": "r2"})
    r2_process = Target("http://10.0.0.8:8080/metrics", r2)
    scrapes: Sequence[tuple[float, str]] = [
        (0, cadvisor(200, 1.2e9)),
        (0, process(50, 0.9e9)),
        (0, process(10, 0.6e9)),
        (60, cadvisor(236, 1.2e9)),
        (60, process(80, 0.9e9)),
        (60, process(22, 0.6e9)),
    ]
    scrape(store, scrapes, [CADVISOR_T, PROCESS_T, r2_process] * 2)
    cores, working_set = cpu_and_mem(store)
    assert cores == pytest.approx((0.6 + 0.2) / 2)
    assert working_set == pytest.approx((1.2e9 + 0.6e9) / 2)
