"""Replica status changes (the health checker's verdicts, a failed replica back) and re-registering a
replica: what the registry stores, which targets it lists, and the REPLICA_TERMINATED and
REPLICA_RECOVERED events."""

from __future__ import annotations

from typing import Any

import pytest

from servemetrics.registry import NotFound, Registry

U1, U2, U3 = "http://10.0.0.1:8080/metrics", "http://10.0.0.1:9400/metrics", "http://10.0.0.9:8080/metrics"


def _changes(reg: Registry) -> list[tuple[int, str, dict[str, Any]]]:
    """(at, kind, {replica, old_status, status, reason}) of every status-change event of m1."""
    keep = ("replica", "old_status", "status", "reason")
    return [
        (e.at_ms, e.kind, {k: e.details[k] for k in keep if k in e.details})
        for e in reg.events.list_events("m1", 0, 10**9, ["REPLICA_TERMINATED", "REPLICA_RECOVERED"])
    ]


def _urls(reg: Registry, *statuses: str) -> list[tuple[str, str, str]]:
    return [
        (x.replica, x.url, x.replica_status) for x in reg.list_targets(statuses or ("STARTING", "ACTIVE"))
    ]


def test_a_failed_replica_back_to_active_is_listed_again_with_an_event(seeded: Registry) -> None:
    seeded.deployments.ensure_target("m1", "d1", "r1", U1)
    d = seeded.deployments
    assert d.set_replica_status("m1", "d1", "r1", "FAILED", "GET /health refused", at_ms=5_000)
    assert _urls(seeded) == []  # neither scraped nor routed to
    assert _urls(seeded, "FAILED") == [("r1", U1, "FAILED")]  # but still health-checked
    assert d.list_replicas("m1", "d1")[0].terminated_at_ms == 5_000
    assert d.set_replica_status("m1", "d1", "r1", "ACTIVE", "healthy", at_ms=7_000, only_from=("FAILED",))
    assert _urls(seeded) == [("r1", U1, "ACTIVE")]
    (back,) = d.list_replicas("m1", "d1")
    assert (back.status, back.terminated_at_ms) == ("ACTIVE", None)
    assert _changes(seeded) == [
        (
            5_000,
            "REPLICA_TERMINATED",
            {"replica": "r1", "old_status": "ACTIVE", "status": "FAILED", "reason": "GET /health refused"},
        ),
        (
            7_000,
            "REPLICA_RECOVERED",
            {"replica": "r1", "old_status": "FAILED", "status": "ACTIVE", "reason": "healthy"},
        ),
    ]


def test_only_from_keeps_a_terminated_replica_terminated(seeded: Registry) -> None:
    d = seeded.deployments
    d.ensure_target("m1", "d1", "r1", U1)
    d.set_replica_status("m1", "d1", "r1", "FAILED", "down", at_ms=5_000)
    d.terminate_replica("m1", "d1", "r1", at_ms=6_000)  # while the health checker was asking
    assert not d.set_replica_status("m1", "d1", "r1", "ACTIVE", "healthy", at_ms=7_000, only_from=("FAILED",))
    assert not d.set_replica_status("m1", "d1", "r1", "FAILED", "down", only_from=("STARTING", "ACTIVE"))
    assert [(r.status, r.terminated_at_ms) for r in d.list_replicas("m1", "d1")] == [("TERMINATED", 6_000)]
    assert [at for at, _, _ in _changes(seeded)] == [5_000, 6_000]
    # STARTING -> ACTIVE is no event (neither status ended)
    d.ensure_replica("m1", "d1", "r2", status="STARTING")
    assert d.set_replica_status("m1", "d1", "r2", "ACTIVE", at_ms=8_000)
    assert [at for at, _, _ in _changes(seeded)] == [5_000, 6_000]


def test_register_replica_creates_then_updates_targets_and_revives(seeded: Registry) -> None:
    d = seeded.deployments
    replica, created = d.register_replica("m1", "d1", "r1", [U1, U2, U1], at_ms=2_000)
    assert created and (replica.id, replica.status, replica.created_at_ms) == ("r1", "ACTIVE", 2_000)
    assert _urls(seeded) == [("r1", U1, "ACTIVE"), ("r1", U2, "ACTIVE")]  # in order, U1 once
    replica, created = d.register_replica("m1", "d1", "r1", [U3, U1], at_ms=3_000)
    assert not created and replica.status == "ACTIVE"
    assert _urls(seeded) == [("r1", U3, "ACTIVE"), ("r1", U1, "ACTIVE")]  # U2 gone, U3 first: the address
    assert _changes(seeded) == []  # an ACTIVE replica re-registered: no status change
    d.set_replica_status("m1", "d1", "r1", "FAILED", "down", at_ms=4_000)
    replica, created = d.register_replica("m1", "d1", "r1", [U3], at_ms=5_000)
    assert not created and (replica.status, replica.terminated_at_ms, replica.created_at_ms) == (
        "ACTIVE",
        None,
        2_000,
    )
    assert _urls(seeded) == [("r1", U3, "ACTIVE")]
    d.terminate_replica("m1", "d1", "r1", at_ms=6_000)
    assert d.register_replica("m1", "d1", "r1", [U1], at_ms=7_000)[0].status == "ACTIVE"
    assert [(at, k, c["old_status"], c["status"], c.get("reason")) for at, k, c in _changes(seeded)] == [
        (4_000, "REPLICA_TERMINATED", "ACTIVE", "FAILED", "down"),
        (5_000, "REPLICA_RECOVERED", "FAILED", "ACTIVE", "registered again"),
        (6_000, "REPLICA_TERMINATED", "ACTIVE", "TERMINATED", None),
        (7_000, "REPLICA_RECOVERED", "TERMINATED", "ACTIVE", "registered again"),
    ]


def test_register_replica_names_the_missing_deployment(seeded: Registry) -> None:
    with pytest.raises(NotFound, match="e1"):  # e1 is m2's (another organization's model)
        seeded.deployments.register_replica("m1", "e1", "r1", [U1])
    assert seeded.deployments.list_replicas("m2", "e1") == []
