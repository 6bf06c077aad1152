"""The demo trainer: its node replays in process, and the trainer as a real process over real HTTP
(training steps, queue-proxy metrics through the knative adapter, node endpoints)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from servemetrics.demo import trainer_replay
from servemetrics.demo.topology import TRAINER, make_topology, service_config
from servemetrics.demo.trainer import FEATURES, BadInput, parse_step
from servemetrics.demo.trainer_load import TrainerLoad
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from tests.processes import free_port, start, stop, wait_http

TS = 1_700_000_000_000


def _adapted(text: str) -> list:
    parsed = parse_exposition(text.encode(), "text/plain; version=0.0.4", TS)
    assert parsed.duplicates == 0
    return adapt(parsed.samples, {"node_id": "n"})


def _by_gpu(samples, name: str) -> dict[str, float]:
    return {dict(s.labels)["gpu"]: s.value for s in samples if s.name == name}


def test_dcgm_replay_has_two_ranks_moving_differently():
    out = _adapted(trainer_replay.NodeGpus().dcgm("leader-0", 0.5, 1.0))
    memory = _by_gpu(out, "baseten_gpu_memory_used")
    util = _by_gpu(out, "baseten_gpu_utilization")
    # rank 0 at the trainer's level 0.5, rank 1 at 0.9 of it; memory: the capture's 1 MiB + 4096 MiB of
    # weights + 8192 MiB x the level (gpu_replay)
    assert util == {"0": 0.5, "1": 0.45}
    assert memory == {"0": 1 + 4096 + 4096, "1": 1 + 4096 + round(0.45 * 8192)}


def test_kubelet_replay_counters_grow_as_the_replay_says():
    out = _adapted(trainer_replay.kubelet("leader-0", 60.0))
    cpu = {
        (dict(s.labels)["pod"], dict(s.labels)["container"]): s.value
        for s in out
        if s.name.endswith("_seconds_total")
    }
    # recorded 10 CPU-s: 10 x (1 + 60 / 120) + 60 / 10 = 21 at t = 60 s
    assert cpu == {
        ("pod_a", "container_a"): 21.0,
        ("pod_b", "container_a"): 21.0,
        ("pod_a", "container_b"): 21.0,
    }


def test_summary_replay_renames_the_trainer_pod_and_grows_its_storage():
    doc = json.loads(trainer_replay.summary(2.5, "pod_a", "namespace_a"))
    pods = {(p["podRef"]["namespace"], p["podRef"]["name"]): p for p in doc["pods"]}
    assert ("namespace_a", "pod_a") in pods and ("loops", "trainer-0") not in pods
    fs = pods[("namespace_a", "pod_a")]["ephemeral-storage"]
    # 10 MB/s x 2.5 s = 25,000,000 B more used, as much less available
    assert fs["usedBytes"] == 22_601_007_104 + 25_000_000
    assert fs["availableBytes"] == 317_827_579_904 - 25_000_000
    assert pods[("gpu-operator", "nvidia-dcgm-exporter-ml2wh")]["ephemeral-storage"]["usedBytes"] == 118_784


@pytest.mark.parametrize(
    "body",
    [b"nope", b"[1]", b'{"x": [[1, 2]], "y": [1]}', b'{"x": [[0,0,0,0,0,0,0,0]], "y": [1], "lr": 5}'],
)
def test_bad_training_steps(body):
    with pytest.raises(BadInput):
        parse_step(body)


def test_the_load_mix_builds_valid_and_bad_bodies():
    load = TrainerLoad("http://127.0.0.1:9/none", 1.0)
    try:
        x, y, lr, fault = parse_step(load.body("step"))
        assert x.shape[1] == FEATURES and y.shape == (x.shape[0],) and lr == 0.05 and not fault
        assert parse_step(load.body("fault"))[3] is True
        with pytest.raises(BadInput):
            parse_step(load.body("malformed"))
    finally:
        load.stop()


def test_the_demo_config_declares_the_trainer(tmp_path):
    topo = make_topology(8321, [9001, 9002, 9003, 9004, 9005, 9006])
    (loops,) = service_config(topo, tmp_path, "k")["loops"]
    assert loops["id"] == TRAINER and loops["sampler"] == {"model": "demo-model", "deployment": "d1"}
    leader, worker = loops["nodes"]
    assert (leader["id"], leader["role"], leader["pod"], worker["pod"]) == (
        "leader-0",
        "leader",
        "pod_a",
        "pod_b",
    )
    assert [t["kind"] for t in leader["targets"]] == ["dcgm", "kubelet", "kubelet_summary", "requests"]
    assert leader["targets"][3]["url"] == "http://127.0.0.1:9006/metrics"


@pytest.fixture(scope="module")
def trainer(tmp_path_factory) -> Iterator[str]:
    port = free_port()
    args = ["-m", "servemetrics.demo.trainer", "--port", str(port), "--node", "leader-0=namespace_a/pod_a"]
    proc = start(args, tmp_path_factory.mktemp("trainer") / "trainer.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health")
        yield base
    finally:
        stop(proc)


def test_trainer_process_trains_and_meters_like_a_queue_proxy(trainer):
    step = {"x": [[1.0] + [0.0] * (FEATURES - 1)] * 4, "y": [2.0] * 4, "lr": 0.5}
    first = httpx.post(f"{trainer}/v1/train_step", json=step)
    assert first.status_code == 200
    # w = 0: error -2 on each row, loss = mean(4) = 4; gradient 2 * x.T @ err / 4 = -4 on w[0]: w[0] = 2
    assert first.json() == {"step": 1, "loss": 4.0}
    assert httpx.post(f"{trainer}/v1/train_step", json=step).json() == {"step": 2, "loss": 0.0}
    bad = httpx.post(f"{trainer}/v1/train_step", content=b"nope")
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
    assert httpx.post(f"{trainer}/v1/train_step", json={**step, "fault": True}).status_code == 500

    out = _adapted(httpx.get(f"{trainer}/metrics").text)
    requests = {
        dict(s.labels)["status_code"]: s.value for s in out if s.name == "baseten_inference_requests_total"
    }
    assert requests == {"200": 2.0, "400": 1.0, "500": 1.0}
    counts = [s.value for s in out if s.name == "baseten_end_to_end_response_time_seconds_count"]
    assert sorted(counts) == [1.0, 1.0, 2.0]
    # ms buckets became seconds: the queue-proxy's 5 ms bucket is le="0.005"
    les = {dict(s.labels)["le"] for s in out if s.name.endswith("_bucket")}
    assert {"0.005", "0.1", "100.0", "+Inf"} <= les
    depth = [s.value for s in out if s.name == "baseten_concurrent_requests"]
    assert depth == [0.0]


def test_trainer_process_serves_its_nodes(trainer):
    summary = httpx.get(f"{trainer}/nodes/leader-0/stats/summary")
    assert summary.headers["content-type"] == "application/json"
    assert "pod_a" in {p["podRef"]["name"] for p in summary.json()["pods"]}
    assert 'gpu="1"' in httpx.get(f"{trainer}/nodes/leader-0/dcgm/metrics").text
    assert "container_cpu_usage_seconds_total" in httpx.get(f"{trainer}/nodes/leader-0/kubelet/metrics").text
    assert httpx.get(f"{trainer}/nodes/worker-9/dcgm/metrics").status_code == 404
