"""Startup attempts in the registry (``registry.startups``, ``registry.startup_marks``), on SQLite and
PostgreSQL: a replica's lifecycle (registered -> first healthy check), its failure or termination before
that, re-registration, stalls, and a pod's kube-state-metrics marks. Times are hand-picked epoch ms."""

from __future__ import annotations

from servemetrics.registry import Registry
from servemetrics.registry.startup_marks import PhaseSpan
from tests.registry.conftest import Clock

STALL = 60_000


def _only(registry: Registry, deployment: str = "d1", start: int = 0, end: int = 10**9):
    (attempt,) = registry.startups.recent([deployment], start, end)
    return attempt


def test_registered_then_healthy_is_one_readiness_phase(seeded: Registry, clock: Clock) -> None:
    seeded.deployments.register_replica("m1", "d1", "r1", ["http://127.0.0.1:1/metrics"], at_ms=10_000)
    clock.now_ms = 13_250
    assert seeded.startups.healthy("d1", "r1") is True
    assert seeded.startups.healthy("d1", "r1", at_ms=20_000) is False  # the attempt is over: nothing moves
    a = _only(seeded)
    assert (a.model_id, a.deployment_name, a.replica, a.source) == ("m1", "v-d1", "r1", "lifecycle")
    assert (a.started_at_ms, a.ready_at_ms, a.ended_at_ms) == (10_000, 13_250, None)
    assert (a.outcome(99_999_999, STALL), a.duration_ms(99_999_999)) == ("SUCCESS", 3_250)
    assert a.phases() == [PhaseSpan("READINESS", "COMPLETED", 0, 3_250)]


def test_failed_or_terminated_before_healthy_is_failed(seeded: Registry) -> None:
    seeded.deployments.register_replica("m1", "d1", "r1", [], at_ms=1_000)
    seeded.deployments.register_replica("m1", "d2", "r1", [], at_ms=2_000)
    seeded.deployments.set_replica_status("m1", "d1", "r1", "FAILED", "crashed", at_ms=4_000)
    seeded.deployments.terminate_replica("m1", "d2", "r1", at_ms=2_500)
    assert seeded.startups.healthy("d1", "r1", at_ms=5_000) is False  # healthy after it failed: too late
    failed, terminated = _only(seeded, "d1"), _only(seeded, "d2")
    assert (failed.outcome(10**9), failed.duration_ms(10**9), failed.ready_at_ms) == ("FAILED", 3_000, None)
    assert failed.phases() == [PhaseSpan("READINESS", "FAILED", 0, None)]
    assert (terminated.outcome(10**9), terminated.duration_ms(10**9)) == ("FAILED", 500)


def test_registered_again_starts_a_new_attempt_and_an_open_one_stalls(seeded: Registry) -> None:
    seeded.deployments.register_replica("m1", "d1", "r1", [], at_ms=1_000)
    seeded.deployments.set_replica_status("m1", "d1", "r1", "FAILED", "crashed", at_ms=2_000)
    seeded.deployments.register_replica("m1", "d1", "r1", [], at_ms=5_000)
    seeded.deployments.register_replica("m1", "d1", "r1", [], at_ms=6_000)  # still ACTIVE: same attempt
    newest, first = seeded.startups.recent(["d1"], 0, 10**9)
    assert (first.started_at_ms, first.ended_at_ms, newest.started_at_ms) == (1_000, 2_000, 5_000)
    assert newest.outcome(5_000 + STALL - 1, STALL) is None  # still starting: not listed yet
    assert newest.outcome(5_000 + STALL, STALL) == "STALLED"
    assert newest.duration_ms(5_000 + STALL + 7) == STALL + 7  # a stalled attempt lasts until now
    assert [a.started_at_ms for a in seeded.startups.recent(["d1"], 0, 5_000)] == [1_000]  # [start, end)
    assert [a.started_at_ms for a in seeded.startups.recent(["d1"], 0, 10**9, limit=1)] == [5_000]


def test_a_pods_marks_become_three_phases_and_replace_the_lifecycle_attempt(seeded: Registry) -> None:
    seeded.deployments.register_replica("m1", "d1", "pod-a", [], at_ms=50_000)
    marks = {"created": 10_000, "scheduled": 12_000, "containers_started": 41_500}
    assert seeded.startups.record_pod("d1", "pod-a", "uid-1", marks, None) is True
    assert seeded.startups.record_pod("d1", "pod-a", "uid-1", marks, None) is False  # unchanged: no write
    open_pod = _only(seeded)  # the lifecycle attempt (registered at 50 s) is gone
    assert (open_pod.source, open_pod.started_at_ms) == ("kube_state", 10_000)
    assert open_pod.outcome(41_600, STALL) is None
    assert seeded.startups.record_pod("d1", "pod-a", "uid-1", {**marks, "ready": 43_000}, None) is True
    ready = _only(seeded)
    assert (ready.outcome(10**9), ready.ready_at_ms, ready.duration_ms(10**9)) == ("SUCCESS", 43_000, 33_000)
    assert ready.phases() == [
        PhaseSpan("SCHEDULING", "COMPLETED", 0, 2_000),
        PhaseSpan("CONTAINER_CREATE", "COMPLETED", 2_000, 29_500),
        PhaseSpan("READINESS", "COMPLETED", 31_500, 1_500),
    ]
    assert seeded.startups.healthy("d1", "pod-a", at_ms=60_000) is False  # timed by its pod, not by us


def test_a_new_pod_ends_the_open_one_and_a_failed_pod_keeps_its_end(seeded: Registry) -> None:
    seeded.startups.record_pod("d1", "pod-a", "uid-1", {"created": 10_000, "scheduled": 11_000}, None)
    seeded.startups.record_pod("d1", "pod-a", "uid-2", {"created": 30_000}, None)
    newer, older = seeded.startups.recent(["d1"], 0, 10**9)
    assert (older.ended_at_ms, older.outcome(10**9), newer.ended_at_ms) == (30_000, "FAILED", None)
    assert older.phases() == [
        PhaseSpan("SCHEDULING", "COMPLETED", 0, 1_000),
        PhaseSpan("CONTAINER_CREATE", "FAILED", 1_000, None),
    ]
    seeded.startups.record_pod("d1", "pod-a", "uid-2", {"created": 30_000}, 35_000)
    seeded.startups.record_pod("d1", "pod-a", "uid-2", {"created": 30_000}, 36_000)  # still Failed later
    assert seeded.startups.recent(["d1"], 30_000, 10**9)[0].ended_at_ms == 35_000
    assert seeded.startups.record_pod("gone", "pod-a", "uid-3", {"created": 1}, None) is False
    assert seeded.startups.record_pod("d1", "pod-a", "uid-4", {"scheduled": 1}, None) is False  # no start
