from __future__ import annotations

import pytest

from servemetrics.ingest.exposition import ExpositionError, normalise_le, parse_exposition
from tests.ingest.fixtures import SCRAPE_MS, fixture_files, parse_fixture, value_of

OM = "application/openmetrics-text; version=1.0.0; charset=utf-8"
T0 = 1767225600
T0_MS = T0 * 1000

# Samples each fixture yields (the _created series of the vLLM 0.10 excerpt dropped).
EXPECTED_COUNTS = {
    "cadvisor_testdata_sample.prom": 27,
    "dcgm_exporter_gpu_operator_t4_excerpt.prom": 4,
    "dcgm_exporter_k8s_pod_sample.prom": 25,
    "knative_autoscaler_issue_excerpt.prom": 1,
    "kube_state_metrics_test_expectations.prom": 63,
    "kubelet_cadvisor_cgroup_systemd_issue_excerpt.prom": 2,
    "kubelet_cadvisor_k3s_containerd_excerpt.prom": 3,
    "kubelet_cadvisor_k8s_pr109398_excerpt.prom": 8,
    "kubelet_cadvisor_rke2_excerpt.prom": 4,
    "kubelet_metrics_resource_test_expectations.prom": 22,
    "sglang_docs_production_metrics_sample.prom": 91,
    "sglang_dp_ranks_issue_excerpt.prom": 9,
    "sglang_engine_type_label_pr_excerpt.prom": 15,
    "triton_trtllm_backend_readme_sample.prom": 26,
    "vllm_v0_aibrix_runtime_docs_sample.prom": 29,
    "vllm_v1_0.10_engine_label_issue_excerpt.prom": 3,
    "vllm_v1_docs_design_sample.prom": 14,
    "vllm_v1_dp_engine1_issue_excerpt.prom": 13,
}


def test_every_fixture_file_is_listed() -> None:
    assert sorted(p.name for p in fixture_files()) == sorted(EXPECTED_COUNTS)


@pytest.mark.parametrize("name", sorted(EXPECTED_COUNTS))
def test_fixture_parses(name: str) -> None:
    result = parse_fixture(name)
    assert len(result.samples) == EXPECTED_COUNTS[name]
    assert result.duplicates == 0


def test_fixture_values_and_timestamps() -> None:
    kubelet = parse_fixture("kubelet_metrics_resource_test_expectations.prom").samples
    cpu = [s for s in kubelet if s.name == "container_cpu_usage_seconds_total"]
    assert [(dict(s.labels)["pod"], s.value, s.ts_ms) for s in cpu] == [
        ("pod_a", 10.0, 1624396278302),
        ("pod_b", 10.0, 1624396278302),
        ("pod_a", 10.0, 1624396278302),
    ]
    # a sample without a timestamp gets the scrape time
    assert [s.ts_ms for s in kubelet if s.name == "scrape_error"] == [SCRAPE_MS]
    dcgm = parse_fixture("dcgm_exporter_gpu_operator_t4_excerpt.prom").samples
    assert value_of(dcgm, "DCGM_FI_DEV_FB_FREE", gpu="0", modelName="Tesla T4") == 15109.0


def test_created_series_are_dropped_and_counter_names_kept_as_exposed() -> None:
    samples = parse_fixture("vllm_v1_0.10_engine_label_issue_excerpt.prom").samples
    assert [s.name for s in samples] == [
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
    ]
    assert value_of(samples, "vllm:prefix_cache_queries_total", engine="0") == 32.0


def test_text_counter_declared_without_total_keeps_its_exposed_name() -> None:
    body = '# TYPE nv_inference_count counter\nnv_inference_count{model="m"} 7\n'
    assert [(s.name, s.value) for s in parse_exposition(body, None, 0).samples] == [
        ("nv_inference_count", 7.0)
    ]


def test_c5_same_series_twice_in_one_scrape_first_wins() -> None:
    body = (
        "# TYPE revision_app_request_count counter\n"
        'revision_app_request_count{namespace_name="ns",revision_name="r1",response_code="200"} 96\n'
        'revision_app_request_count{namespace_name="ns",revision_name="r1",response_code="200"} 95\n'
    )
    result = parse_exposition(body, "text/plain; version=0.0.4", T0_MS)
    assert [(s.name, s.value, s.ts_ms) for s in result.samples] == [
        ("revision_app_request_count", 96.0, T0_MS)
    ]
    assert result.duplicates == 1


C6_ZERO = """# TYPE req_latency_seconds histogram
req_latency_seconds_bucket{le="0.5"} 0
req_latency_seconds_bucket{le="1.0"} 0
req_latency_seconds_bucket{le="+inf"} 0
req_latency_seconds_count 0
req_latency_seconds_sum 0
# EOF
"""
C6 = """# TYPE req_latency_seconds histogram
req_latency_seconds_bucket{le="0.5"} 3
req_latency_seconds_bucket{le="1.0"} 8
req_latency_seconds_bucket{le="+inf"} 10
req_latency_seconds_count 10
req_latency_seconds_sum 7.2
# EOF
"""


def test_c6_lower_case_inf_bucket_is_stored_as_plus_inf() -> None:
    first = parse_exposition(C6_ZERO, OM, T0_MS).samples
    second = parse_exposition(C6, OM, T0_MS + 15_000).samples
    assert {dict(s.labels).get("le") for s in first if s.name.endswith("_bucket")} == {"0.5", "1.0", "+Inf"}
    buckets = {dict(s.labels)["le"]: s.value for s in second if s.name == "req_latency_seconds_bucket"}
    assert buckets == {"0.5": 3.0, "1.0": 8.0, "+Inf": 10.0}
    assert value_of(second, "req_latency_seconds_sum") == 7.2
    assert value_of(second, "req_latency_seconds_count") == 10.0
    assert all(s.ts_ms == T0_MS + 15_000 for s in second)


def test_c6_text_format_bounds_are_one_bucket_however_written() -> None:
    body = 'h_bucket{le="1"} 1\nh_bucket{le="1.0"} 2\nh_bucket{le="+inf"} 3\nh_bucket{le="Inf"} 4\n'
    result = parse_exposition(body, None, 0)
    assert [(dict(s.labels)["le"], s.value) for s in result.samples] == [("1.0", 1.0), ("+Inf", 3.0)]
    assert result.duplicates == 2
    assert [normalise_le(x) for x in ("0.005", "5000", "2.5e6", "1e-9")] == [
        "0.005",
        "5000.0",
        "2.5e+06",
        "1e-09",
    ]


@pytest.mark.parametrize("le", ["+inf", "Inf", "INF", "+Infinity", " +inf "])
def test_c15_openmetrics_accepts_every_spelling_of_inf(le: str) -> None:
    body = f'# TYPE h histogram\nh_bucket{{le="1"}} 1\nh_bucket{{le="{le}"}} 2\nh_count 2\nh_sum 1\n# EOF\n'
    result = parse_exposition(body, OM, T0_MS)
    assert [dict(s.labels)["le"] for s in result.samples if s.name == "h_bucket"] == ["1.0", "+Inf"]


@pytest.mark.parametrize(
    ("openmetrics", "le"), [(True, "abc"), (True, "NaN"), (False, "abc"), (False, "NaN")]
)
def test_c15_a_bound_that_is_not_a_number_names_its_line(openmetrics: bool, le: str) -> None:
    body = f'# TYPE h histogram\nh_bucket{{le="1"}} 1\nh_bucket{{le="{le}"}} 2\nh_bucket{{le="+Inf"}} 2\n'
    body += "h_count 2\nh_sum 1\n" + ("# EOF\n" if openmetrics else "")
    with pytest.raises(
        ExpositionError, match=f"^line 3: sample h_bucket: bucket bound le='{le}' is not a number$"
    ):
        parse_exposition(body, OM if openmetrics else None, T0_MS)
    with pytest.raises(ValueError, match="is not a number"):
        normalise_le(le)


C7 = """# TYPE conn_duration_seconds histogram
conn_duration_seconds_bucket{le="1.0"} 1
conn_duration_seconds_bucket{le="5000.0"} 3 # 5.9 1767225600.0
conn_duration_seconds_bucket{le="+Inf"} 3
conn_duration_seconds_count 3
conn_duration_seconds_sum 4.1
# EOF
"""


def test_c7_malformed_line_fails_the_whole_scrape_naming_line_3() -> None:
    with pytest.raises(ExpositionError, match=r"^line 3: invalid OpenMetrics exposition: Invalid line"):
        parse_exposition(C7, OM, T0_MS)
    good = C7.replace(" # 5.9 1767225600.0", ' # {trace_id="a"} 5.9 1767225600.0')
    assert (
        value_of(parse_exposition(good, OM, T0_MS).samples, "conn_duration_seconds_bucket", le="5000.0") == 3
    )


def test_c7_text_format_error_names_the_line() -> None:
    with pytest.raises(ExpositionError, match=r"^line 2: invalid Prometheus text"):
        parse_exposition('ok 1\nbad{a="1" 2\nok2 3\n', None, 0)


def test_undecodable_body_is_an_exposition_error() -> None:
    with pytest.raises(ExpositionError, match="not UTF-8"):
        parse_exposition(b"a 1\n\xff\xfe 2\n", None, 0)


def test_c8_timestamp_units_text_ms_openmetrics_seconds() -> None:
    text = parse_exposition('a_total {foo="bar"} 1 1767225600000\n', "text/plain", 5).samples
    om = parse_exposition('a_total{foo="bar"} 1 1767225600.000\n# EOF\n', None, 5).samples
    assert text == om
    assert [(s.name, s.labels, s.value, s.ts_ms) for s in om] == [("a_total", (("foo", "bar"),), 1.0, T0_MS)]
    fractional = parse_exposition("# TYPE a gauge\na 1 1767225600.123456\n# EOF\n", OM, 5).samples
    assert fractional[0].ts_ms == T0_MS + 123


def test_c8_interleaved_families_give_two_series_per_name() -> None:
    body = 'a_total{foo="bar"} 1\nb_total{foo="bar"} 2\na_total{foo="baz"} 3\nb_total{foo="baz"} 4\n'
    samples = parse_exposition(body, None, T0_MS).samples
    series = {(s.name, s.labels): s.value for s in samples}
    assert series == {
        ("a_total", (("foo", "bar"),)): 1.0,
        ("b_total", (("foo", "bar"),)): 2.0,
        ("a_total", (("foo", "baz"),)): 3.0,
        ("b_total", (("foo", "baz"),)): 4.0,
    }


def test_nan_samples_are_dropped() -> None:
    samples = parse_exposition('# TYPE g gauge\ng{a="1"} NaN\ng{a="2"} 1.5\n', None, 0).samples
    assert [(s.labels, s.value) for s in samples] == [((("a", "2"),), 1.5)]


def test_openmetrics_detected_by_eof_without_content_type() -> None:
    # In OpenMetrics the counter family is "c" and its sample "c_total"; the text parser would rename.
    samples = parse_exposition("# TYPE c counter\nc_total 4\n# EOF\n", None, 0).samples
    assert [(s.name, s.value) for s in samples] == [("c_total", 4.0)]
