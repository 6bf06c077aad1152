from __future__ import annotations

import pytest

from servemetrics.catalog.metrics import CATALOG
from servemetrics.catalog.model import Kind
from servemetrics.catalog.trainer import TRAINER_CATALOG
from servemetrics.ingest.adapters import ADAPTERS, adapt, rules_for
from servemetrics.ingest.adapters.engines import ALIASES, source_of
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.labels import TARGET_LABELS
from servemetrics.samples import Sample
from tests.ingest.fixtures import REPO_ROOT, SCRAPE_MS, fixture_files, parse_fixture, value_of

TARGET = {
    "model_id": "m1",
    "model_name": "llama",
    "deployment_id": "d1",
    "replica": "r1",
    "environment": "production",
    "rollout_phase": "stable",
}
T0_MS = 1767225600000


def adapted(name: str) -> list[Sample]:
    return adapt(parse_fixture(name).samples, TARGET)


def labels(sample: Sample) -> dict[str, str]:
    return dict(sample.labels)


# Canonical / engine samples each real fixture adapts to.
EXPECTED_COUNTS = {
    "cadvisor_testdata_sample.prom": 1,
    "dcgm_exporter_gpu_operator_t4_excerpt.prom": 0,
    "dcgm_exporter_k8s_pod_sample.prom": 11,
    "knative_autoscaler_issue_excerpt.prom": 0,
    "kube_state_metrics_test_expectations.prom": 5,
    "kubelet_cadvisor_cgroup_systemd_issue_excerpt.prom": 0,
    "kubelet_cadvisor_k3s_containerd_excerpt.prom": 1,
    "kubelet_cadvisor_k8s_pr109398_excerpt.prom": 0,
    "kubelet_cadvisor_rke2_excerpt.prom": 0,
    "kubelet_metrics_resource_test_expectations.prom": 6,
    "sglang_docs_production_metrics_sample.prom": 139,  # 91 + 48 baseten_llm_*: tokens, requests, TTFT, TPOT
    "sglang_dp_ranks_issue_excerpt.prom": 9,
    "sglang_engine_type_label_pr_excerpt.prom": 16,  # 15 + running requests as baseten_llm_num_requests
    # the two detection markers (4 + 1 series), success and failure as baseten_inference_requests_total
    "triton_trtllm_backend_readme_sample.prom": 7,
    "vllm_v0_aibrix_runtime_docs_sample.prom": 33,  # 29 + tokens, running, waiting as baseten_llm_*
    "vllm_v1_0.10_engine_label_issue_excerpt.prom": 3,
    "vllm_v1_docs_design_sample.prom": 25,  # 14 + 11 baseten_llm_*: tokens, running, TTFT 8 buckets, count
    "vllm_v1_dp_engine1_issue_excerpt.prom": 13,
}


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_adapts_with_target_labels(path) -> None:
    out = adapted(path.name)
    assert len(out) == EXPECTED_COUNTS[path.name]
    for s in out:
        family = s.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        assert s.name in CATALOG or family in CATALOG or source_of(s.name)
        assert labels(s).items() >= TARGET.items()
        assert "source" in labels(s)


def test_dcgm_k8s_pod_sample_gpu0() -> None:
    out = adapted("dcgm_exporter_k8s_pod_sample.prom")
    gpu0 = {"gpu": "0", "source": "dcgm", **TARGET}
    # UUID, Hostname, pod... are not kept; the remapped-row counters add which kind of row
    assert all(labels(s) == gpu0 for s in out if s.name != "baseten_gpu_remapped_rows_total")
    # PROF_GR_ENGINE_ACTIVE (0.004656) wins over DEV_GPU_UTIL (0 %).
    assert value_of(out, "baseten_gpu_utilization") == 0.004656
    assert value_of(out, "baseten_gpu_memory_used") == 1.0  # MiB
    assert value_of(out, "baseten_gpu_temperature_celsius") == 48.0
    assert value_of(out, "baseten_gpu_tensor_core_utilization") == 0.0
    assert value_of(out, "baseten_gpu_memory_bandwidth_utilization") == 0.003074
    # power in W feeds the mean and the total; the SM clock's 2310 MHz is stored in Hz
    assert value_of(out, "baseten_gpu_power_usage_watts") == 40.979
    assert value_of(out, "baseten_gpu_power_total_watts") == 40.979
    assert value_of(out, "baseten_gpu_sm_clock_hertz") == 2.31e9
    rows = {labels(s)["rows"]: s.value for s in out if s.name == "baseten_gpu_remapped_rows_total"}
    assert rows == {"correctable": 0.0, "uncorrectable": 0.0}
    assert value_of(out, "baseten_gpu_row_remap_failure") == 0.0
    assert {s.ts_ms for s in out} == {SCRAPE_MS}


def test_dcgm_dev_util_percent_becomes_ratio_without_prof() -> None:
    body = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a"} 48\nDCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b"} 7\n'
        'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b"} 20015\n'
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, {})
    assert [(s.name, labels(s)["gpu"], s.value) for s in out] == [
        ("baseten_gpu_utilization", "0", 0.48),
        ("baseten_gpu_utilization", "1", 0.07),
        ("baseten_gpu_memory_used", "1", 20015.0),
    ]


def test_c10_gpu_utilisation_on_a_mig_instance() -> None:
    mig = 'gpu="0",UUID="GPU-0000",modelName="NVIDIA A100 80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="{}"'
    body = (
        f"DCGM_FI_DEV_GPU_UTIL{{{mig.format(1)}}} 0\n"
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{mig.format(1)}}} 0.62\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{mig.format(2)}}} 0\n"
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{mig.format(2)}}} 0.1\n"
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, {"replica": "r1"})
    assert [(s.name, s.labels, s.value) for s in out] == [
        (
            "baseten_gpu_utilization",
            (("gpu", "0"), ("gpu_instance", "1"), ("replica", "r1"), ("source", "dcgm")),
            0.62,
        ),
        (
            "baseten_gpu_utilization",
            (("gpu", "0"), ("gpu_instance", "2"), ("replica", "r1"), ("source", "dcgm")),
            0.1,
        ),
    ]
    # DEV_GPU_UTIL alone on MIG is never used (it is always 0 there)
    only_dev = adapt(parse_exposition(f"DCGM_FI_DEV_GPU_UTIL{{{mig.format(1)}}} 0\n", None, 0).samples, {})
    assert only_dev == []


def test_prof_wins_over_dev_on_a_whole_gpu_in_either_order() -> None:
    body = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"} 0.555\nDCGM_FI_DEV_GPU_UTIL{gpu="0"} 56\n'
    out = adapt(parse_exposition(body, None, T0_MS).samples, {})
    assert [(s.name, s.value) for s in out] == [("baseten_gpu_utilization", 0.555)]


def test_cadvisor_kubelet_k3s_skips_pod_and_pause_rows() -> None:
    out = adapted("kubelet_cadvisor_k3s_containerd_excerpt.prom")
    assert [
        (s.name, labels(s)["container"], labels(s)["pod"], labels(s)["source"], s.value, s.ts_ms) for s in out
    ] == [
        (
            "baseten_container_cpu_usage_seconds_total",
            "calico-csi",
            "csi-node-driver-cw5mj",
            "cadvisor",
            0.578437,
            1766129158671,
        )
    ]


def test_cadvisor_standalone_keeps_total_cpu_and_working_set() -> None:
    out = adapted("cadvisor_testdata_sample.prom")
    # per-CPU rows (cpu00..cpu03) are not the total and are skipped
    assert [(s.name, labels(s)["container"], s.value, s.ts_ms) for s in out] == [
        ("baseten_container_cpu_memory_working_set_bytes", "testcontaineralias", 9.0, 1395066363000)
    ]


def test_cadvisor_dockershim_pod_container_is_skipped() -> None:
    body = (
        'container_memory_working_set_bytes{container="POD",id="/kubepods/p1/x",pod="p",namespace="n"} 5\n'
        'container_memory_working_set_bytes{container="app",id="/kubepods/p1/y",pod="p",namespace="n"} 7\n'
    )
    out = adapt(parse_exposition(body, None, 0).samples, {})
    assert [(labels(s)["container"], s.value) for s in out] == [("app", 7.0)]


def test_kubelet_resource_endpoint() -> None:
    out = adapted("kubelet_metrics_resource_test_expectations.prom")
    cpu = [
        (labels(s)["namespace"], labels(s)["pod"], labels(s)["container"], s.value)
        for s in out
        if s.name == "baseten_container_cpu_usage_seconds_total"
    ]
    assert cpu == [
        ("namespace_a", "pod_a", "container_a", 10.0),
        ("namespace_b", "pod_b", "container_a", 10.0),
        ("namespace_a", "pod_a", "container_b", 10.0),
    ]
    assert value_of(out, "baseten_container_cpu_memory_working_set_bytes", pod="pod_b") == 1000.0
    assert {labels(s)["source"] for s in out} == {"kubelet_resource"}
    assert {s.ts_ms for s in out} == {1624396278302}


def test_kube_state_restarts_and_readiness() -> None:
    out = adapted("kube_state_metrics_test_expectations.prom")
    assert value_of(out, "baseten_container_restarts_total", container="container3", pod="pod2") == 1.0
    assert value_of(out, "baseten_container_restarts_total", container="container2", pod="pod2") == 0.0
    ready = {labels(s)["condition"]: s.value for s in out if s.name == "baseten_pod_readiness"}
    assert ready == {"false": 1.0, "true": 0.0, "unknown": 0.0}


def test_process_metrics_of_a_plain_python_replica() -> None:
    body = (
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n"
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1.2e+08\n"
        "# TYPE process_open_fds gauge\nprocess_open_fds 9\n"
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, {"replica": "r1"})
    assert [(s.name, s.labels, s.value) for s in out] == [
        ("baseten_container_cpu_usage_seconds_total", (("replica", "r1"), ("source", "process")), 12.5),
        ("baseten_container_cpu_memory_working_set_bytes", (("replica", "r1"), ("source", "process")), 1.2e8),
    ]


def test_knative_opencensus_generation_ms_to_seconds() -> None:
    rev = 'namespace_name="ns",revision_name="r1",response_code="200",response_code_class="2xx"'
    body = (
        f"# TYPE revision_app_request_count counter\nrevision_app_request_count{{{rev}}} 96\n"
        "# TYPE revision_app_request_latencies histogram\n"
        f'revision_app_request_latencies_bucket{{{rev},le="150"}} 90\n'
        f'revision_app_request_latencies_bucket{{{rev},le="5000"}} 95\n'
        f'revision_app_request_latencies_bucket{{{rev},le="+Inf"}} 96\n'
        f"revision_app_request_latencies_sum{{{rev}}} 14400\n"
        f"revision_app_request_latencies_count{{{rev}}} 96\n"
        '# TYPE revision_queue_depth gauge\nrevision_queue_depth{namespace_name="ns"} 3\n'
        'autoscaler_actual_pods{namespace_name="ns",revision_name="r1"} 2\n'
        'autoscaler_stable_request_concurrency{revision_name="r1"} 53\n'
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, {})
    got = [
        (s.name, labels(s).get("status_code", labels(s).get("le", labels(s).get("revision"))), s.value)
        for s in out
    ]
    assert got == [
        ("baseten_inference_requests_total", "200", 96.0),
        ("baseten_end_to_end_response_time_seconds_bucket", "200", 90.0),
        ("baseten_end_to_end_response_time_seconds_bucket", "200", 95.0),
        ("baseten_end_to_end_response_time_seconds_bucket", "200", 96.0),
        ("baseten_end_to_end_response_time_seconds_sum", "200", 14.4),
        ("baseten_end_to_end_response_time_seconds_count", "200", 96.0),
        ("baseten_concurrent_requests", None, 3.0),
        ("baseten_replicas_active", "r1", 2.0),
    ]
    assert [labels(s)["le"] for s in out if s.name.endswith("_bucket")] == ["0.15", "5.0", "+Inf"]
    assert all(labels(s)["source"] == "knative" and "response_code_class" not in labels(s) for s in out)


@pytest.mark.parametrize(
    "family", ["kn_serving_invocation_duration_seconds", "kn_queueproxy_app_duration_seconds"]
)
def test_knative_opentelemetry_generation(family: str) -> None:
    st = 'http_response_status_code="503",otel_scope_name="knative.dev/serving"'
    body = (
        f"# TYPE {family} histogram\n"
        f'{family}_bucket{{{st},le="0.25"}} 1\n{family}_bucket{{{st},le="+Inf"}} 4\n'
        f"{family}_sum{{{st}}} 2.5\n{family}_count{{{st}}} 4\n"
        '# TYPE kn_revision_pods_count gauge\nkn_revision_pods_count{kn_revision_name="r2"} 3\n'
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, {})
    assert value_of(out, "baseten_inference_requests_total", status_code="503") == 4.0
    assert value_of(out, "baseten_end_to_end_response_time_seconds_count", status_code="503") == 4.0
    assert value_of(out, "baseten_end_to_end_response_time_seconds_bucket", le="0.25") == 1.0
    assert value_of(out, "baseten_end_to_end_response_time_seconds_sum") == 2.5
    assert value_of(out, "baseten_replicas_active", revision="r2") == 3.0
    assert all("otel_scope_name" not in labels(s) for s in out)


def test_passthrough_keeps_canonical_names_and_converts_gpu_percent() -> None:
    body = (
        'baseten_inference_requests_total{status_code="200",is_async="false",model_id="spoofed"} 5\n'
        'baseten_gpu_utilization{gpu="0"} 73\n'
        'baseten_end_to_end_response_time_seconds_bucket{le="1",status_code="200"} 5\n'
    )
    out = adapt(parse_exposition(body, None, T0_MS).samples, TARGET)
    assert [(s.name, s.value) for s in out] == [
        ("baseten_inference_requests_total", 5.0),
        ("baseten_gpu_utilization", 0.73),
        ("baseten_end_to_end_response_time_seconds_bucket", 5.0),
    ]
    assert labels(out[0]) == {"status_code": "200", "is_async": "false", **TARGET}  # target label overrides
    assert labels(out[2])["le"] == "1.0"
    assert all("source" not in labels(s) for s in out)


def test_engine_metrics_kept_under_their_own_names() -> None:
    out = adapted("vllm_v1_docs_design_sample.prom")
    assert value_of(out, "vllm:generation_tokens_total") == 27453.0
    assert value_of(out, "vllm:request_success_total", finished_reason="length") == 131.0
    assert value_of(out, "vllm:time_to_first_token_seconds_bucket", le="0.1") == 140.0
    assert labels(out[0])["source"] == "vllm"
    assert labels(out[0])["model_name"] == "llama"  # the target's model name overrides the engine's
    dp = adapted("vllm_v1_dp_engine1_issue_excerpt.prom")
    assert value_of(dp, "vllm:request_decode_time_seconds_bucket", le="+Inf", engine="1") == 1.0
    sglang = adapted("sglang_docs_production_metrics_sample.prom")
    assert value_of(sglang, "sglang:token_usage") == 0.28
    assert value_of(sglang, "sglang:time_to_first_token_seconds_bucket", le="1.0") == 27.0
    ranks = adapted("sglang_dp_ranks_issue_excerpt.prom")
    assert sorted(labels(s)["dp_rank"] for s in ranks if s.name == "sglang:num_paused_reqs") == list("01235")


def test_vllm_v0_old_cache_name_is_stored_under_the_new_name() -> None:
    out = adapted("vllm_v0_aibrix_runtime_docs_sample.prom")
    assert "vllm:gpu_cache_usage_perc" not in {s.name for s in out}
    assert value_of(out, "vllm:kv_cache_usage_perc") == 0.0
    assert value_of(out, "vllm:cpu_prefix_cache_hit_rate") == -1.0


def test_c9_renamed_engine_metric_stays_one_series() -> None:
    old = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.42\n'
    new = 'vllm:kv_cache_usage_perc{model_name="m"} 0.40\n'
    scrapes = [old, old + new, new + old, new]
    out = [
        s
        for i, body in enumerate(scrapes)
        for s in adapt(parse_exposition(body, None, T0_MS + i * 15_000).samples, {"replica": "r1"})
    ]
    assert {(s.name, s.labels) for s in out} == {
        ("vllm:kv_cache_usage_perc", (("model_name", "m"), ("replica", "r1"), ("source", "vllm")))
    }
    assert [(s.ts_ms - T0_MS, s.value) for s in out] == [
        (0, 0.42),
        (15_000, 0.40),
        (30_000, 0.40),
        (45_000, 0.40),
    ]


def test_unknown_metrics_are_dropped() -> None:
    # Triton: the engine-detection markers are kept (ingest.adapters.engines.MARKERS), as they are
    # with source="triton", and its request counters become the request metric (adapters.custom_servers);
    # its other 19 series (memory, KV blocks, durations ...) are dropped (no custom_limit: not kept)
    out = adapted("triton_trtllm_backend_readme_sample.prom")
    kept = sorted(
        (s.name, labels(s).get("request_type", labels(s).get("status_code", "")), s.value) for s in out
    )
    assert kept == [
        ("baseten_inference_requests_total", "200", 0.0),
        ("baseten_inference_requests_total", "500", 0.0),
        ("nv_inference_request_success", "", 0.0),
        ("nv_trt_llm_request_metrics", "active", 0.0),
        ("nv_trt_llm_request_metrics", "context", 1.0),
        ("nv_trt_llm_request_metrics", "max", 512.0),
        ("nv_trt_llm_request_metrics", "scheduled", 1.0),
    ]
    assert all(labels(s)["source"] == "triton" and labels(s)["model"] == "tensorrt_llm" for s in out)
    assert rules_for("nv_inference_count") == ()
    assert rules_for("node_cpu_usage_seconds_total") == ()


def test_adapters_table_targets_are_canonical() -> None:
    suffixes = {Kind.HISTOGRAM: ("_bucket", "_sum", "_count")}
    canonical = {m.name + sfx for m in CATALOG.values() for sfx in suffixes.get(m.kind, ("",))}
    canonical |= set(TRAINER_CATALOG)  # trainer-only series (catalog/trainer.py), all gauges
    for source, rules in ADAPTERS.items():
        for rule in rules:
            if source == "engines":
                assert rule.match.removesuffix("_total") in ALIASES or any(
                    rule.match == old + sfx for old in ALIASES for sfx in ("_bucket", "_sum", "_count")
                )
            else:
                assert rule.target in canonical, rule
                assert (rule.source == "") == (source == "passthrough"), rule
    assert set(TARGET_LABELS) == set(TARGET)
    # every canonical metric except those only the gateway knows has at least one non-passthrough source
    mapped = {r.target for src, rules in ADAPTERS.items() if src != "passthrough" for r in rules}
    assert {
        "baseten_gpu_utilization",
        "baseten_container_cpu_usage_seconds_total",
        "baseten_container_restarts_total",
        "baseten_pod_readiness",
        "baseten_inference_requests_total",
        "baseten_replicas_active",
    } <= mapped


def test_docs_page_lists_every_adapter_rule() -> None:
    page = (REPO_ROOT / "docs" / "ingest.md").read_text()
    for source, rules in ADAPTERS.items():
        if source in ("passthrough", "engines"):
            continue
        for rule in rules:
            base = rule.match.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            target = rule.target.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            assert f"`{base}" in page, rule.match
            assert f"`{target}" in page, rule.target
            assert f"| {rule.source} |" in page or f"| {rule.source}," in page, rule.source
