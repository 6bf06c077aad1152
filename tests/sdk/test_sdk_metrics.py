"""The three metrics endpoints and the Loops list through the platform's SDK (`baseten` 0.13.1) against
a real `servemetrics serve` (tests/sdk/conftest.py): the values are the DCGM fixture's, scraped live, and
the imported request counter's, computed by hand."""

from __future__ import annotations

import pytest
from baseten.client.managementapi import (
    GetLoopsDeploymentMetricsRequest,
    GetLoopsDeploymentsParams,
    GetModelMetricsResponse,
    GetModelsDeploymentsMetricsParams,
    GetModelsEnvironmentsMetricsParams,
    ResponseError,
)

from tests.sdk.conftest import Service

pytestmark = pytest.mark.sdk

GPU = ["baseten_gpu_temperature_celsius", "baseten_gpu_memory_used", "baseten_gpu_utilization"]
REQUESTS = ["baseten_inference_requests_total"]
ENGINE_ACTIVE = 0.004656
"""`DCGM_FI_PROF_GR_ENGINE_ACTIVE` of GPU 0 in the fixture: the utilisation (0-1) we serve."""


def _by_name(answer: GetModelMetricsResponse, step: int = 0) -> dict[str, tuple[str, list[float | None]]]:
    """Metric name -> (unit hint, its cells in value set ``step``)."""
    values = answer.metric_values[step].values
    return {d.name: (d.unit_hint, values[i]) for i, d in enumerate(answer.metric_descriptors)}


def test_environment_current_gpu_values_and_the_celsius_unit(service: Service) -> None:
    answer = service.api.get_models_environments_metrics(
        model_id="m1", env_name="production", params=GetModelsEnvironmentsMetricsParams(metrics=GPU)
    )
    assert (answer.mode, answer.step_seconds, len(answer.metric_values)) == ("CURRENT", None, 1)
    assert _by_name(answer) == {
        "baseten_gpu_temperature_celsius": ("CELSIUS", [48.0]),
        "baseten_gpu_memory_used": ("MEBIBYTES", [1.0]),
        "baseten_gpu_utilization": ("RATIO", [ENGINE_ACTIVE]),
    }


def test_environment_and_deployment_summary_of_the_imported_counter(service: Service) -> None:
    start, end = service.history
    env = service.api.get_models_environments_metrics(
        model_id="m1",
        env_name="production",
        params=GetModelsEnvironmentsMetricsParams(
            mode="SUMMARY", start_epoch_millis=start, end_epoch_millis=end, metrics=REQUESTS
        ),
    )
    dep = service.api.get_models_deployments_metrics(
        model_id="m1",
        deployment_id="d1",
        params=GetModelsDeploymentsMetricsParams(
            mode="SUMMARY", start_epoch_millis=start, end_epoch_millis=end, metrics=REQUESTS
        ),
    )
    for answer in (env, dep):
        assert (answer.start_epoch_millis, answer.end_epoch_millis, answer.mode) == (start, end, "SUMMARY")
        assert [d.label_sets for d in answer.metric_descriptors] == [
            [{"status": "2xx"}, {"status": "4xx"}, {"status": "5xx"}]
        ]
        assert _by_name(answer) == {"baseten_inference_requests_total": ("COUNT", [13.0, 0.0, 0.0])}


def test_deployment_series_adds_up_to_the_counters_increase(service: Service) -> None:
    start, end = service.history
    answer = service.api.get_models_deployments_metrics(
        model_id="m1",
        deployment_id="d1",
        params=GetModelsDeploymentsMetricsParams(
            mode="SERIES", start_epoch_millis=start, end_epoch_millis=end, metrics=REQUESTS
        ),
    )
    assert (answer.step_seconds, len(answer.metric_values)) == (30, 10)  # 5 min in 30 s steps
    assert sum(v.values[0][0] or 0.0 for v in answer.metric_values) == 13.0


def test_metrics_of_another_organizations_model_are_a_404(service: Service) -> None:
    with pytest.raises(ResponseError) as err:
        service.other.get_models_environments_metrics(model_id="m1", env_name="production")
    assert err.value.status_code == 404


def test_loops_list_and_one_trainer(service: Service) -> None:
    listed = service.api.get_loops_deployments().deployments
    assert [(t.id, t.node_count, t.status.name, t.instance_type.gpu_count) for t in listed] == [
        ("t1", 1, "CREATED", 1)
    ]
    sampler = listed[0].sampler
    assert sampler is not None
    assert (sampler.id, sampler.model_id, sampler.deployment_id, sampler.status.name) == (
        "d1",
        "m1",
        "d1",
        "ACTIVE",
    )
    assert sampler.instance_type is not None and sampler.instance_type.name == "1xH100"
    org = service.api.get_loops_deployments(params=GetLoopsDeploymentsParams(scope="org")).deployments
    assert [t.id for t in org] == ["t1"]
    one = service.api.get_loops_deployments_deployment_id(deployment_id="t1").deployment
    assert one == listed[0]
    assert service.other.get_loops_deployments().deployments == []
    with pytest.raises(ResponseError) as err:
        service.other.get_loops_deployments_deployment_id(deployment_id="t1")
    assert err.value.status_code == 404


def test_loops_metrics_per_rank_gpu_values(service: Service) -> None:
    answer = service.api.post_loops_deployments_metrics(
        deployment_id="t1", request=GetLoopsDeploymentMetricsRequest(step_seconds=60)
    )
    metrics = answer.metrics
    assert answer.deployment_id == "t1"
    assert list(metrics.gpu_utilization) == ["0"] and list(metrics.gpu_memory_usage_bytes) == ["0"]
    utilization = {p.value for p in metrics.gpu_utilization["0"]}
    memory = {p.value for p in metrics.gpu_memory_usage_bytes["0"]}
    assert (utilization, memory) == ({ENGINE_ACTIVE}, {1048576.0})  # 1 MiB of frame buffer
    assert [n.node_id for n in metrics.per_node_metrics] == ["n0"]
    assert (metrics.cpu_usage, metrics.inference_volume) == ([], [])  # no kubelet, no request target
