"""The recording rules agree with ``adapt`` on the real exporter fixtures, evaluated by real engines.

Debian's Prometheus (rules in ``rule_files``) and VictoriaMetrics (scraping with ``-promscrape.config``,
rules evaluated by vmalert) scrape every fixture, served from a local HTTP server as one target each with
the registry labels an HTTP SD target carries and the ``metric_relabel_configs`` the rule file asks for
(``honor_timestamps: false``: the fixtures carry old timestamps); the rules run every second. Every
canonical series the engine records must be a series ``adapt`` makes of the same text (name and labels),
with the same value to 1e-9 relative, and nothing more; ``adapt``'s only other series are the engine
series kept under their own names (``DIFFERENCES["engine_passthrough"]``). One extra target pins
``DIFFERENCES["collapse"]``: two source series that become one canonical series.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from servemetrics.catalog import CATALOG
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.adapters.knative import OC_LATENCY_BUCKETS_MS
from servemetrics.ingest.exposition import OPENMETRICS_CONTENT_TYPE, is_openmetrics, parse_exposition
from servemetrics.ingest.recording_rules import compile_groups, exposed_relabel_config, render
from servemetrics.samples import Sample
from servemetrics.store.promql import Flavor
from tests.conftest import REPO_ROOT
from tests.engines.engines import Engine, require
from tests.processes import free_port

SHARED = REPO_ROOT.parent / "shared" / "fixtures" / "exposition"
FIXTURES = (
    "dcgm_exporter_k8s_pod_sample.prom",
    "dcgm_exporter_gpu_operator_t4_excerpt.prom",
    "cadvisor_testdata_sample.prom",
    "kubelet_cadvisor_cgroup_systemd_issue_excerpt.prom",
    "kubelet_cadvisor_k3s_containerd_excerpt.prom",
    "kubelet_cadvisor_k8s_pr109398_excerpt.prom",
    "kubelet_cadvisor_rke2_excerpt.prom",
    "kubelet_metrics_resource_test_expectations.prom",
    "kube_state_metrics_test_expectations.prom",
    "knative_autoscaler_issue_excerpt.prom",
    "vllm_v0_aibrix_runtime_docs_sample.prom",
    "vllm_v1_0.10_engine_label_issue_excerpt.prom",
    "vllm_v1_docs_design_sample.prom",
    "vllm_v1_dp_engine1_issue_excerpt.prom",
    "sglang_docs_production_metrics_sample.prom",
    "sglang_dp_ranks_issue_excerpt.prom",
    "sglang_engine_type_label_pr_excerpt.prom",
)

# Knative queue-proxy as its Go exporters write it (no real capture in the shared fixtures):
# OpenCensus era, ms buckets with integer spellings; OpenTelemetry era, seconds buckets ("1", "5", "10").
_OC_TAGS = 'namespace_name="ns",revision_name="r-00001",pod_name="r-00001-pod"'
OC_OBSERVED_MS = (3, 7, 8, 45, 90, 250, 999, 1500, 30000, 200000)
KNATIVE_OC_GO = "\n".join(
    [
        "# TYPE revision_app_request_count counter",
        f'revision_app_request_count{{{_OC_TAGS},response_code="200",response_code_class="2xx"}} 10',
        f'revision_app_request_count{{{_OC_TAGS},response_code="503",response_code_class="5xx"}} 2',
        "# TYPE revision_app_request_latencies histogram",
        *(
            f'revision_app_request_latencies_bucket{{{_OC_TAGS},response_code="200",le="{b:g}"}} '
            f"{sum(ms <= b for ms in OC_OBSERVED_MS)}"
            for b in OC_LATENCY_BUCKETS_MS
        ),
        f'revision_app_request_latencies_bucket{{{_OC_TAGS},response_code="200",le="+Inf"}} 10',
        f'revision_app_request_latencies_sum{{{_OC_TAGS},response_code="200"}} {sum(OC_OBSERVED_MS)}',
        f'revision_app_request_latencies_count{{{_OC_TAGS},response_code="200"}} 10',
        "# TYPE revision_queue_depth gauge",
        f"revision_queue_depth{{{_OC_TAGS}}} 3",
        "# TYPE autoscaler_actual_pods gauge",
        'autoscaler_actual_pods{namespace_name="ns",revision_name="r-00001"} 2',
        "",
    ]
)
_OTEL = 'http_response_status_code="200",otel_scope_name="knative.dev/serving/pkg/queue"'
KNATIVE_OTEL_GO = "\n".join(
    [
        "# TYPE kn_serving_invocation_duration_seconds histogram",
        *(
            f'kn_serving_invocation_duration_seconds_bucket{{{_OTEL},le="{le}"}} {n}'
            for le, n in (("0.005", 1), ("0.1", 4), ("1", 7), ("5", 8), ("10", 9), ("+Inf", 9))
        ),
        f"kn_serving_invocation_duration_seconds_sum{{{_OTEL}}} 7.25",
        f"kn_serving_invocation_duration_seconds_count{{{_OTEL}}} 9",
        "# TYPE kn_serving_queue_depth gauge",
        'kn_serving_queue_depth{otel_scope_name="knative.dev/serving/pkg/queue"} 1',
        "# TYPE kn_revision_pods_count gauge",
        'kn_revision_pods_count{k8s_namespace_name="ns",kn_revision_name="r-00002"} 4',
        "",
    ]
)
# A gateway-compatible replica exposing canonical names (percent GPU utilisation, a Python histogram).
PASSTHROUGH = "\n".join(
    [
        "# TYPE baseten_gpu_utilization gauge",
        'baseten_gpu_utilization{gpu="0"} 37.5',
        "# TYPE baseten_time_to_first_byte_seconds histogram",
        'baseten_time_to_first_byte_seconds_bucket{le="0.5"} 2.0',
        'baseten_time_to_first_byte_seconds_bucket{le="1.0"} 3.0',
        'baseten_time_to_first_byte_seconds_bucket{le="+Inf"} 4.0',
        "baseten_time_to_first_byte_seconds_sum 3.5",
        "baseten_time_to_first_byte_seconds_count 4.0",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.25',
        "",
    ]
)
# DIFFERENCES["collapse"]: two rows of one container (a restart: old and new cgroup) -> one series.
COLLAPSE = "\n".join(
    [
        "# TYPE container_memory_working_set_bytes gauge",
        'container_memory_working_set_bytes{container="app",id="/kubepods/p/a",namespace="ns",pod="p"} 5',
        'container_memory_working_set_bytes{container="app",id="/kubepods/p/b",namespace="ns",pod="p"} 7',
        "",
    ]
)

# C13, one container, one value: two views of one replica's container in one target; the rules record
# only the preferred one (cAdvisor), as the query layer would choose (``_preferred``).
_C13_POD = 'namespace="ns",pod="p1",container="app"'
C13_VIEWS = "\n".join(
    [
        "# TYPE container_cpu_usage_seconds_total counter",
        f'container_cpu_usage_seconds_total{{id="/kubepods/burstable/pod1/c1",{_C13_POD},cpu="total"}} 236',
        f"container_cpu_usage_seconds_total{{{_C13_POD}}} 236",
        "# TYPE container_memory_working_set_bytes gauge",
        f'container_memory_working_set_bytes{{id="/kubepods/burstable/pod1/c1",{_C13_POD}}} 1.2e9',
        f"container_memory_working_set_bytes{{{_C13_POD}}} 1.2e9",
        "# TYPE process_cpu_seconds_total counter",
        "process_cpu_seconds_total 80",
        "# TYPE process_resident_memory_bytes gauge",
        "process_resident_memory_bytes 9e8",
        "",
    ]
)
C13_RESOURCE_AND_PROCESS = "\n".join(
    [
        "# TYPE container_memory_working_set_bytes gauge",
        f"container_memory_working_set_bytes{{{_C13_POD}}} 1.1e9",
        "# TYPE process_resident_memory_bytes gauge",
        "process_resident_memory_bytes 9e8",
        "",
    ]
)

# NaN and infinite values: the parser drops them, the rules filter them (no canonical series at all).
NOT_FINITE = "\n".join(
    [
        "# TYPE process_resident_memory_bytes gauge",
        "process_resident_memory_bytes NaN",
        "# TYPE revision_queue_depth gauge",
        "revision_queue_depth +Inf",
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
        'DCGM_FI_DEV_GPU_TEMP{gpu="0"} -Inf',
        'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 41',
        "",
    ]
)


def _python_exposition() -> dict[str, str]:
    """Knative's OpenCensus era as prometheus_client writes it ("5.0") and the process collector."""
    reg = CollectorRegistry()
    labels = ["response_code", "response_code_class"]
    requests = Counter("revision_app_request_count", "", labels, registry=reg)
    latency = Histogram(
        "revision_app_request_latencies", "", labels, buckets=OC_LATENCY_BUCKETS_MS, registry=reg
    )
    for ms, code in ((3.0, "200"), (42.0, "200"), (1500.0, "200"), (90.0, "500")):
        requests.labels(code, code[0] + "xx").inc()
        latency.labels(code, code[0] + "xx").observe(ms)
    process = CollectorRegistry()
    ProcessCollector(registry=process)
    return {"knative_oc_python": generate_latest(reg).decode(), "process": generate_latest(process).decode()}


Key = tuple[str, tuple[tuple[str, str], ...]]
"""A series: name and sorted labels."""


@dataclass(frozen=True)
class Body:
    text: str
    content_type: str


def _bodies() -> dict[str, Body]:
    out = {}
    for name in FIXTURES:
        text = (SHARED / name).read_text()
        kind = OPENMETRICS_CONTENT_TYPE if is_openmetrics(text, None) else CONTENT_TYPE_LATEST
        out[name.removesuffix(".prom").replace(".", "_")] = Body(text, kind)
    node = (REPO_ROOT / "tests" / "fixtures" / "node_exporter_filesystem.prom").read_text()
    hand = {
        "knative_oc_go": KNATIVE_OC_GO,
        "knative_otel_go": KNATIVE_OTEL_GO,
        "passthrough": PASSTHROUGH,
        "not_finite": NOT_FINITE,
        "c13_views": C13_VIEWS,
        "c13_resource_and_process": C13_RESOURCE_AND_PROCESS,
    }
    for name, text in {**_python_exposition(), **hand, "node_exporter": node, "collapse": COLLAPSE}.items():
        out[name] = Body(text, CONTENT_TYPE_LATEST)
    return out


def _labels(key: str) -> dict[str, str]:
    return {
        "model_id": "m1",
        "model_name": "llama",
        "deployment_id": "d1",
        "replica": key,
        "environment": "production",
        "rollout_phase": "stable",
    }


@pytest.fixture(scope="module")
def bodies() -> dict[str, Body]:
    return _bodies()


@pytest.fixture(scope="module")
def exporter(bodies: dict[str, Body]) -> Iterator[str]:
    """A local HTTP server answering ``/<key>`` with that body."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = bodies.get(self.path.lstrip("/"))
            if body is None:
                self.send_error(404)
                return
            data = body.text.encode()
            self.send_response(200)
            self.send_header("Content-Type", body.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class RulesEngine(Engine):
    """Prometheus with our rule file, or VictoriaMetrics scraping by itself (``-promscrape.config``);
    one static scrape target per fixture."""

    config: str = ""

    def args(self) -> list[str]:
        args = super().args()
        (self.root / "prometheus.yml").write_text(self.config)
        if self.flavor is Flavor.VICTORIAMETRICS:
            args.append(f"-promscrape.config={self.root / 'prometheus.yml'}")
        return args


def _config(root: Path, exporter: str, keys: list[str], flavor: Flavor) -> str:
    targets = [{"targets": [exporter], "labels": {"__metrics_path__": f"/{k}", **_labels(k)}} for k in keys]
    scrape = {
        "job_name": "fixtures",
        "honor_timestamps": False,
        "static_configs": targets,
        "metric_relabel_configs": [exposed_relabel_config()],
    }
    if flavor is Flavor.VICTORIAMETRICS:  # vmalert evaluates the rules
        return yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": [scrape]})
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(root / "rules.yml")],
        "scrape_configs": [scrape],
    }
    return yaml.safe_dump(config)


def _vmalert(root: Path, engine: Engine) -> subprocess.Popen[bytes]:
    """vmalert evaluating the rule file every second against VictoriaMetrics and writing the results back."""
    if not shutil.which("vmalert"):
        message = "vmalert is not installed (Debian's victoria-metrics package ships it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    args = [
        "vmalert",
        f"-rule={root / 'rules.yml'}",
        f"-datasource.url={engine.url}",
        f"-remoteWrite.url={engine.url}",
        "-evaluationInterval=1s",
        "-remoteWrite.flushInterval=200ms",
        f"-httpListenAddr=127.0.0.1:{free_port()}",
    ]
    with open(root / "vmalert.log", "ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module", params=[Flavor.PROMETHEUS, Flavor.VICTORIAMETRICS], ids=str)
def engine(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    exporter: str,
    bodies: dict[str, Body],
) -> Iterator[str]:
    """The engine's URL once it scrapes every fixture and evaluates ``servemetrics rules`` every second."""
    flavor: Flavor = request.param
    require(flavor)
    root: Path = tmp_path_factory.mktemp(f"rules-{flavor.value}")
    (root / "rules.yml").write_text(render(1.0))
    engine = RulesEngine(flavor, root, config=_config(root, exporter, list(bodies), flavor))
    vmalert = None
    try:
        engine.start()
        vmalert = _vmalert(root, engine) if flavor is Flavor.VICTORIAMETRICS else None
        _wait_for_rules(engine.url, bodies)
        yield engine.url
    finally:
        if vmalert is not None:
            vmalert.terminate()
            vmalert.wait(timeout=30)
        engine.stop()


def _query(url: str, expr: str) -> list[dict[str, object]]:
    body = httpx.get(url + "/api/v1/query", params={"query": expr}).json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _one(url: str, expr: str, deadline_s: float = 30.0) -> dict[str, object]:
    """The one series ``expr`` gives, polled until there is one: a scrape that times out on a loaded
    machine (1 s interval) leaves its series and the rules' stale for a second, and an instant query
    in that second finds none; the values asserted are the fixtures', which a later scrape gives again."""
    stop = time.monotonic() + deadline_s
    while True:
        found = _query(url, expr)
        if len(found) == 1 or time.monotonic() > stop:
            [one] = found
            return one
        time.sleep(0.5)


def _python_side(bodies: dict[str, Body]) -> dict[Key, float]:
    out: dict[Key, float] = {}
    for key, body in bodies.items():
        parsed = parse_exposition(body.text.encode(), body.content_type, 1_000).samples
        same_time = [Sample(s.name, s.labels, s.value, 1_000) for s in parsed]  # honor_timestamps: false
        for s in adapt(same_time, _labels(key)):
            assert s.key not in out, s
            out[s.key] = s.value
    return out


def _engine_side(url: str) -> dict[Key, float]:
    out: dict[Key, float] = {}
    for series in _query(url, '{__name__=~".+", job=""}'):  # recorded series have no job label
        metric = dict(series["metric"])  # type: ignore[call-overload]
        name = metric.pop("__name__")
        out[(name, tuple(sorted(metric.items())))] = float(series["value"][1])  # type: ignore[index]
    return out


def _preferred(python: dict[Key, float]) -> dict[Key, float]:
    """Of the views of one replica's container (``MetricDef.sources``), only the most preferred one: the
    choice the query layer makes, which the rules make at evaluation (C13)."""

    def view(key: Key) -> tuple[tuple[str, str], int] | None:
        metric = CATALOG.get(key[0])
        if metric is None or not metric.sources:
            return None
        labels = dict(key[1])
        return (key[0], labels["replica"]), metric.source_rank(labels.get("source", ""))

    best: dict[tuple[str, str], int] = {}
    for key in python:
        if (v := view(key)) is not None:
            best[v[0]] = min(v[1], best.get(v[0], v[1]))
    return {k: x for k, x in python.items() if (v := view(k)) is None or v[1] == best[v[0]]}


def _expected(bodies: dict[str, Body]) -> dict[Key, float]:
    """``adapt``'s series of every body that the rule file records (the others: engine passthrough), of a
    replica's container views only the preferred one."""
    python = _preferred(_python_side(bodies))
    recorded = {r.record for g in compile_groups() for r in g.rules}
    not_recorded = {k for k in python if k[0] not in recorded}
    assert {k[0].split(":")[0] for k in not_recorded} == {"vllm", "sglang"}  # engine_passthrough only
    return {k: v for k, v in python.items() if k not in not_recorded}


COLLAPSED = ("baseten_container_cpu_memory_working_set_bytes", "collapse")
"""The one series where the rules (max) and ``adapt`` (the first) differ by design (asserted by hand)."""


def _settled(have: dict[Key, float], want: dict[Key, float]) -> bool:
    """Every series ``adapt`` makes is recorded with its value (the collapsed one with any value): the
    rules have evaluated on the scraped fixtures (vmalert starts its groups at random offsets, and
    VictoriaMetrics shows written samples about a second later)."""
    return all(
        k in have
        and (
            math.isclose(v, have[k], rel_tol=1e-9)
            or (k[0] == COLLAPSED[0] and ("replica", COLLAPSED[1]) in k[1])
        )
        for k, v in want.items()
    )


def _wait_for_rules(url: str, bodies: dict[str, Body], deadline_s: float = 60.0) -> None:
    """Until every target was scraped and the engine holds every series ``adapt`` makes of them with its
    value (``_settled``), polled every 0.5 s for at most ``deadline_s``."""
    stop = time.monotonic() + deadline_s
    expected = _expected(bodies)
    want = set(expected)
    have: set[Key] = set()
    while time.monotonic() < stop:
        recorded = _engine_side(url)
        have = set(recorded)
        if _settled(recorded, expected):
            return
        time.sleep(0.5)
    up = _query(url, 'up{job="fixtures"} == 1')
    raise AssertionError(
        f"{len(up)} of {len(bodies)} fixture targets up; {len(want - have)} expected series not recorded "
        "(or not at adapt's values yet), "
        f"e.g. {sorted(want - have)[:3]}"
    )


def test_recorded_series_equal_adapt_on_the_fixtures(engine: str, bodies: dict[str, Body]) -> None:
    recorded_series = _engine_side(engine)
    expected = _expected(bodies)

    [key] = [k for k in expected if k[0] == COLLAPSED[0] and ("replica", COLLAPSED[1]) in k[1]]
    assert (expected.pop(key), recorded_series.pop(key)) == (5.0, 7.0)  # adapt: the first; rules: max

    assert sorted(set(recorded_series) - set(expected)) == []
    assert sorted(set(expected) - set(recorded_series)) == []
    wrong = {
        k: (v, recorded_series[k])
        for k, v in expected.items()
        if not math.isclose(v, recorded_series[k], rel_tol=1e-9)
    }
    assert wrong == {}
    names = {k[0] for k in expected}
    assert (
        len(expected) > 100
        and {  # every adapter with an input here produced something
            "baseten_gpu_utilization",
            "baseten_container_cpu_usage_seconds_total",
            "baseten_container_restarts_total",
            "baseten_pod_readiness",
            "baseten_end_to_end_response_time_seconds_bucket",
            "baseten_inference_requests_total",
            "baseten_concurrent_requests",
            "baseten_replicas_active",
            "baseten_ephemeral_storage_capacity_bytes",
            "baseten_time_to_first_byte_seconds_bucket",
            "vllm:kv_cache_usage_perc",
        }
        <= names
    )


def test_c13_rules_record_the_preferred_view(engine: str) -> None:
    """By hand: cAdvisor beats the kubelet's resource view and the process collector in one replica,
    the resource view beats the process collector where there is no cAdvisor, the process collector
    alone still records (its own fixture, a replica of its own)."""

    def sources(name: str, replica: str) -> dict[str, float]:
        found = _query(engine, f'{name}{{replica="{replica}"}}')
        return {s["metric"]["source"]: float(s["value"][1]) for s in found}  # type: ignore[index]

    cpu, mem = "baseten_container_cpu_usage_seconds_total", "baseten_container_cpu_memory_working_set_bytes"
    assert sources(cpu, "c13_views") == {"cadvisor": 236.0}
    assert sources(mem, "c13_views") == {"cadvisor": 1.2e9}
    assert sources(mem, "c13_resource_and_process") == {"kubelet_resource": 1.1e9}
    assert set(sources(mem, "process")) == {"process"}


def test_rescaled_and_normalised_buckets(engine: str) -> None:
    """By hand: the Go-written OpenCensus ms bounds become seconds as ``adapt`` writes them, the
    OpenTelemetry integer bounds get ``.0``, percent becomes a ratio, NaN and infinite samples give no
    series, the PROF field beats DEV."""
    prometheus = engine

    def les(replica: str) -> dict[str, float]:
        expr = f'baseten_end_to_end_response_time_seconds_bucket{{replica="{replica}",status_code="200"}}'
        return {s["metric"]["le"]: float(s["value"][1]) for s in _query(prometheus, expr)}  # type: ignore[index]

    oc = les("knative_oc_go")
    assert len(oc) == 27  # 26 bounds and +Inf
    assert (oc["0.005"], oc["0.01"], oc["0.1"], oc["1.0"], oc["100.0"], oc["+Inf"]) == (1, 3, 5, 7, 9, 10)
    assert les("knative_otel_go") == {"0.005": 1, "0.1": 4, "1.0": 7, "5.0": 8, "10.0": 9, "+Inf": 9}
    total = _one(prometheus, 'baseten_end_to_end_response_time_seconds_sum{replica="knative_oc_go"}')
    assert float(total["value"][1]) == 232.902  # 232,902 ms  # type: ignore[index]
    gpu = _one(prometheus, 'baseten_gpu_utilization{replica="passthrough"}')
    assert float(gpu["value"][1]) == 0.375  # type: ignore[index]
    finite = _one(prometheus, '{replica="not_finite", job=""}')
    assert (finite["metric"]["__name__"], finite["metric"]["gpu"]) == ("baseten_gpu_temperature_celsius", "1")  # type: ignore[index]
    dcgm = _one(prometheus, 'baseten_gpu_utilization{source="dcgm"}')  # PROF 0.004656, DEV 0 %
    assert (dcgm["metric"]["gpu"], float(dcgm["value"][1])) == ("0", 0.004656)  # type: ignore[index]
