"""Startup times through the platform's SDK (`baseten` 0.13.1): `get_models_deployments_startups`,
`…_startups_summary` and the environment forms parse our answers with the SDK's own models
(`StartupAttempts`, `StartupSummary`), which hold what the service observed (tests/sdk/conftest.py):

- `x1`'s two pods, from the kube-state-metrics fixture (hand-checked; its README row): `llm-7f9c-x2k4p`
  created at `CREATED`, scheduled +2 s, containers started +71 s, ready +164.5 s (SCHEDULING 2,000 ms,
  CONTAINER_CREATE 69,000 ms, READINESS 93,500 ms); `llm-7f9c-q8n2m` created +10 s, scheduled +11 s and
  `Failed` before its containers started;
- `d1`'s replica `r1`, a plain machine: registered when the service applied its config, then healthy at
  its first check (READINESS only).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from baseten.client.managementapi import (
    GetModelsDeploymentsStartupsParams,
    GetModelsDeploymentsStartupsSummaryParams,
    GetModelsEnvironmentsStartupsParams,
    GetModelsEnvironmentsStartupsSummaryParams,
    ResponseError,
    StartupAttempts,
)

from tests.processes import wait_until
from tests.sdk.conftest import Service

pytestmark = pytest.mark.sdk
CREATED = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _window() -> dict[str, int]:
    return {"start_epoch_millis": CREATED - 60_000, "end_epoch_millis": int(time.time() * 1000) + 60_000}


def _pods(service: Service, **params: Any) -> StartupAttempts:
    """x1's attempts once both pods' timestamps were scraped (the first scrapes may still be on the way)."""

    def both() -> bool:
        found = service.other.get_models_deployments_startups(
            model_id="m9", deployment_id="x1", params=GetModelsDeploymentsStartupsParams(**_window())
        )
        return sorted(i.replica_id or "" for i in found.items) == ["llm-7f9c-q8n2m", "llm-7f9c-x2k4p"]

    wait_until(both, "both pods' startups")
    return service.other.get_models_deployments_startups(
        model_id="m9", deployment_id="x1", params=GetModelsDeploymentsStartupsParams(**_window(), **params)
    )


def test_pod_phases_from_kube_state_metrics(service: Service) -> None:
    page = _pods(service)
    assert [(i.replica_id, i.outcome) for i in page.items] == [
        ("llm-7f9c-q8n2m", "FAILED"),  # newest first
        ("llm-7f9c-x2k4p", "SUCCESS"),
    ]
    failed, ready = page.items
    assert (ready.started_at_epoch_millis, ready.ready_at_epoch_millis) == (CREATED, CREATED + 164_500)
    assert (ready.duration_ms, ready.deployment_name, ready.environment_name) == (164_500, "pods", None)
    assert [(p.phase, p.status, p.offset_ms, p.duration_ms) for p in ready.phase_summary] == [
        ("SCHEDULING", "COMPLETED", 0, 2_000),
        ("CONTAINER_CREATE", "COMPLETED", 2_000, 69_000),
        ("READINESS", "COMPLETED", 71_000, 93_500),
    ]
    assert [(p.phase, p.status, p.offset_ms, p.duration_ms) for p in failed.phase_summary] == [
        ("SCHEDULING", "COMPLETED", 0, 1_000),
        ("CONTAINER_CREATE", "FAILED", 1_000, None),
    ]
    assert (failed.started_at_epoch_millis, failed.ready_at_epoch_millis) == (CREATED + 10_000, None)
    assert (page.total_count, page.pagination.has_more, page.pagination.cursor) == (2, False, None)


def test_filters_and_the_cursor(service: Service) -> None:
    ok = _pods(service, outcomes=["SUCCESS"], phase="READINESS", search="llm-7f9c-x2k4p")
    assert [i.replica_id for i in ok.items] == ["llm-7f9c-x2k4p"]
    first = _pods(service, limit=1, sort_by="DURATION", direction="asc")
    assert first.pagination.has_more and first.pagination.cursor
    second = _pods(service, limit=1, sort_by="DURATION", direction="asc", cursor=first.pagination.cursor)
    assert (second.pagination.has_more, second.total_count) == (False, 2)
    assert {first.items[0].replica_id, second.items[0].replica_id} == {"llm-7f9c-x2k4p", "llm-7f9c-q8n2m"}
    assert first.items[0].duration_ms <= second.items[0].duration_ms


def test_summary_and_environment_forms(service: Service) -> None:
    _pods(service)
    summary = service.other.get_models_deployments_startups_summary(
        model_id="m9", deployment_id="x1", params=GetModelsDeploymentsStartupsSummaryParams(**_window())
    )
    total = summary.total_duration_ms
    assert (total.sample_count, total.mean_ms, total.p50_ms, total.p99_ms) == (1, 164_500, 164_500, 164_500)
    phases = {p.phase: p.duration_ms for p in summary.phase_duration_ms}
    assert list(phases) == ["SCHEDULING", "CONTAINER_CREATE", "READINESS"]
    # SCHEDULING of both pods: 1,000 and 2,000 ms: mean 1,500, p50 = the 1st of 2, p90 = the 2nd
    scheduling = phases["SCHEDULING"]
    assert (scheduling.sample_count, scheduling.mean_ms, scheduling.p50_ms, scheduling.p90_ms) == (
        2,
        1_500,
        1_000,
        2_000,
    )
    assert (phases["CONTAINER_CREATE"].sample_count, phases["READINESS"].p95_ms) == (1, 93_500)
    env = service.other.get_models_environments_startups(
        model_id="m9", env_name="production", params=GetModelsEnvironmentsStartupsParams(**_window())
    )
    assert [(i.replica_id, i.environment_name) for i in env.items] == [
        ("llm-7f9c-q8n2m", "production"),
        ("llm-7f9c-x2k4p", "production"),
    ]
    env_summary = service.other.get_models_environments_startups_summary(
        model_id="m9", env_name="production", params=GetModelsEnvironmentsStartupsSummaryParams(**_window())
    )
    assert env_summary.total_duration_ms == summary.total_duration_ms


def test_a_plain_replica_is_registered_then_healthy(service: Service) -> None:
    page = service.api.get_models_deployments_startups(
        model_id="m1", deployment_id="d1", params=GetModelsDeploymentsStartupsParams(**_window())
    )
    (r1,) = page.items
    assert (r1.replica_id, r1.outcome, r1.environment_name) == ("r1", "SUCCESS", None)
    assert r1.ready_at_epoch_millis is not None
    assert r1.duration_ms == r1.ready_at_epoch_millis - r1.started_at_epoch_millis >= 0
    assert [(p.phase, p.status, p.offset_ms) for p in r1.phase_summary] == [("READINESS", "COMPLETED", 0)]
    assert r1.phase_summary[0].duration_ms == r1.duration_ms


def test_another_organizations_deployment_is_a_404(service: Service) -> None:
    with pytest.raises(ResponseError) as err:
        service.api.get_models_deployments_startups(
            model_id="m9", deployment_id="x1", params=GetModelsDeploymentsStartupsParams(**_window())
        )
    assert err.value.status_code == 404
