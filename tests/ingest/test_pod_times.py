"""A pod's startup timestamps from kube-state-metrics (``ingest/pod_times.py``), hand-checked against
``tests/fixtures/kube_state_startups.prom`` (its README row lists the timestamps)."""

from __future__ import annotations

from servemetrics.ingest.exposition import parse_exposition
from servemetrics.ingest.pod_times import PodTimes, pod_times
from tests.conftest import REPO_ROOT

KSM = REPO_ROOT / "tests" / "fixtures" / "kube_state_startups.prom"
CREATED_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _times(pod: str) -> list[PodTimes]:
    parsed = parse_exposition(KSM.read_bytes(), "text/plain; version=0.0.4", CREATED_MS + 600_000)
    return pod_times(parsed.samples, pod, parsed.created)


def test_the_ready_pods_marks_in_epoch_ms() -> None:
    assert _times("llm-7f9c-x2k4p") == [
        PodTimes(
            "5b1e0c3a-0001",
            {
                "created": CREATED_MS,
                "scheduled": CREATED_MS + 2_000,
                "containers_started": CREATED_MS + 71_000,  # the later of proxy (+50 s) and model (+71 s)
                "ready": CREATED_MS + 164_500,
            },
            failed=False,
        )
    ]


def test_a_failed_pod_and_a_pod_not_there() -> None:
    failed = PodTimes(
        "5b1e0c3a-0002", {"created": CREATED_MS + 10_000, "scheduled": CREATED_MS + 11_000}, True
    )
    assert _times("llm-7f9c-q8n2m") == [failed]
    assert _times("r1") == []
