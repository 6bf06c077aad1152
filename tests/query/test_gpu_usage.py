"""``query.gpu_usage``: active GPUs per step from ``baseten_replicas_active`` x ``gpu_count``."""

from __future__ import annotations

import pytest

from servemetrics.api.schemas import gpu_usage_body
from servemetrics.query.errors import WindowError
from servemetrics.query.gpu_usage import GpuDeployment, GroupBy
from servemetrics.query.gpu_usage import gpu_usage as query_gpu_usage
from tests.query.helpers import T0, at, series, store_with

ACTIVE = "baseten_replicas_active"
A100 = GpuDeployment("m1", "llama", "d1", "A100", 2)
H100 = GpuDeployment("m2", "whisper", "d2", "H100", 1)


def gpu_usage(*args, **kwargs):
    """``query.gpu_usage`` as the JSON object the API answers."""
    return gpu_usage_body(query_gpu_usage(*args, **kwargs))


def test_hand_computed_two_deployments():
    store = store_with(
        series(ACTIVE, [(0, 2), (15, 2), (30, 3), (45, 3)], deployment_id="d1"),
        series(ACTIVE, [(0, 2), (15, 2), (30, 3), (45, 3)], model_id="m2", deployment_id="d2"),
    )
    body = gpu_usage(store, [A100, H100], T0, at(60), at(600))
    # A100: 2 replicas x 2 = 4, then 3 x 2 = 6; H100: 2 x 1 = 2, then 3 x 1 = 3
    assert body["groups"] == [
        {"key": "A100", "name": "A100", "values": [4.0, 6.0]},
        {"key": "H100", "name": "H100", "values": [2.0, 3.0]},
    ]
    by_model = gpu_usage(store, [A100, H100], T0, at(60), at(600), GroupBy.MODEL)["groups"]
    assert [(g["key"], g["name"], g["values"]) for g in by_model] == [
        ("m1", "llama", [4.0, 6.0]),
        ("m2", "whisper", [2.0, 3.0]),
    ]


def test_a_promotion_relabelling_a_series_is_not_summed():
    # d1's replica gauge changes rollout_phase at 20 s (a promotion started): two series, one quantity.
    store = store_with(
        series(
            ACTIVE, [(0, 2), (10, 2)], deployment_id="d1", environment="production", rollout_phase="stable"
        ),
        series(ACTIVE, [(20, 2)], deployment_id="d1", environment="production", rollout_phase="promoting"),
    )
    body = gpu_usage(store, [A100], T0, at(30), at(600))
    # one 30 s step: the pieces (mean 2 and 2) are averaged -> 2 replicas x 2 GPUs = 4, not 8
    assert body["groups"] == [{"key": "A100", "name": "A100", "values": [4.0]}]


def test_partial_steps_and_replicas_changing_inside_a_step():
    store = store_with(series(ACTIVE, [(5, 1), (20, 2), (40, 4)], deployment_id="d1"))
    body = gpu_usage(store, [A100], at(5), at(65), at(600))
    # window [5 s, 65 s), 30 s steps at 5 (window start), 30 and 60: [5, 30) mean (1 + 2) / 2 = 1.5
    # -> 3 GPUs; [30, 60) 4 -> 8 GPUs; [60, 65) no sample -> null
    assert body["timestamps"] == [at(5), at(30), at(60)]
    assert body["groups"][0]["values"] == [3.0, 8.0, None]


def test_cpu_deployments_filters_and_windows():
    store = store_with(series(ACTIVE, [(0, 1)], deployment_id="d9"))
    cpu = GpuDeployment("m1", "llama", "d9", "unknown", 0)
    body = gpu_usage(store, [cpu, A100], T0, at(30), at(600))
    assert (body["gpu_types"], body["groups"]) == (["A100"], [])  # d1 has no samples; d9 has no GPUs
    assert gpu_usage(store, [A100], T0, at(30), at(600), gpu_types=["T4"])["groups"] == []
    with pytest.raises(WindowError, match="7 days"):
        gpu_usage(store, [A100], T0, T0 + 8 * 86_400_000, at(600))
    week = gpu_usage(store, [A100], T0, T0 + 7 * 86_400_000, at(600))
    assert week["step_seconds"] == 1800 and len(week["timestamps"]) == 336  # 7 d / 30 min
