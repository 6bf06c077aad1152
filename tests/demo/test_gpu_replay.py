"""The DCGM replay: one utilisation level drives every field of the real capture (``demo.gpu_replay``),
measured from the replica's busy time (``demo.busy``, the replica's ``GET /busy``). Expected values are
computed by hand from the capture (``replays/dcgm_exporter_k8s_pod_sample.prom``: GR_ENGINE_ACTIVE
0.004656, DRAM_ACTIVE 0.003074, POWER_USAGE 40.979 W, GPU_TEMP 48 °C, FB free / used / reserved 20015 /
1 / 457 MiB, PCIe TX / RX 78398480 / 45987793 B/s, energy 455497156 mJ)."""

from __future__ import annotations

import time

import httpx
import pytest

from servemetrics.demo.busy import BusyMeter, utilisation
from servemetrics.demo.gpu_replay import GpuReplay, gauges, recorded_values
from servemetrics.demo.replay import FILES, REPLAYS, Gpus
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from tests.demo.conftest import wait_engine_idle
from tests.processes import free_port

CAPTURE = (REPLAYS / FILES["dcgm"]).read_text()
IDLE = recorded_values(CAPTURE)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_busy_meter_counts_time_with_work_running():
    clock = Clock()
    meter = BusyMeter(clock)
    for t, op in [(1, "enter"), (2, "enter"), (3, "leave"), (5, "leave"), (7, "enter")]:
        clock.t = t
        getattr(meter, op)()
    clock.t = 8
    assert meter.busy_seconds() == 5.0  # 1-5 (two overlapping requests count once) and 7-8
    with pytest.raises(ValueError, match="without a matching enter"):
        BusyMeter().leave()
    assert utilisation((10.0, 2.0), (20.0, 7.0)) == 0.5
    assert utilisation((10.0, 2.0), (10.0, 7.0)) == 0.0  # no time passed
    assert utilisation((10.0, 0.0), (11.0, 3.0)) == 1.0  # clamped


def test_every_field_follows_one_level():
    at = gauges(0.5, IDLE)
    assert at == pytest.approx(
        {
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.5,
            "DCGM_FI_DEV_GPU_UTIL": 50.0,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.3,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.353074,
            "DCGM_FI_DEV_MEM_COPY_UTIL": 35.0,
            "DCGM_FI_DEV_POWER_USAGE": 85.4895,  # 40.979 + (130 - 40.979) / 2
            "DCGM_FI_DEV_GPU_TEMP": 63.0,
            "DCGM_FI_DEV_FB_USED": 8193.0,  # 1 + 4096 weights + 8192 / 2
            "DCGM_FI_DEV_FB_FREE": 11823.0,  # 20473 - 457 - 8193
            "DCGM_FI_PROF_PCIE_TX_BYTES": 98398480.0,
            "DCGM_FI_PROF_PCIE_RX_BYTES": 105987793.0,
        }
    )
    idle = gauges(0.0, IDLE)
    assert idle["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.004656 and idle["DCGM_FI_DEV_GPU_UTIL"] == 0.0
    assert idle["DCGM_FI_DEV_POWER_USAGE"] == 40.979 and idle["DCGM_FI_DEV_GPU_TEMP"] == 48.0
    assert gauges(3.0, IDLE) == gauges(1.0, IDLE)  # clamped to 0-1


def test_render_keeps_the_capture_and_integrates_energy():
    gpu = GpuReplay(CAPTURE)
    first = recorded_values(gpu.render(0.5, 100.0))
    assert first["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == 455497156
    second = recorded_values(gpu.render(0.5, 110.0))
    assert second["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == 455497156 + 854895  # 85.4895 W x 10 s in mJ
    # not driven by load: served as recorded (an LLM uses no video encoder or decoder)
    for name in ("DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS"):
        assert second[name] == IDLE[name] == 0
    assert second["DCGM_FI_DEV_SM_CLOCK"] == 2310
    lines = gpu.render(0.5, 120.0).splitlines()
    assert len(lines) == len(CAPTURE.splitlines())
    assert [x for x in lines if x.startswith("#")] == [x for x in CAPTURE.splitlines() if x.startswith("#")]


def test_the_service_reads_the_level_as_utilisation():
    text = GpuReplay(CAPTURE).render(0.25, 1.0)
    parsed = parse_exposition(text.encode(), "text/plain; version=0.0.4", 1_700_000_000_000)
    out = {s.name: s.value for s in adapt(parsed.samples, {"replica": "r"})}
    assert out["baseten_gpu_utilization"] == 0.25
    assert out["baseten_gpu_tensor_core_utilization"] == 0.15
    assert out["baseten_gpu_memory_used"] == 1 + 4096 + 2048
    assert out["baseten_gpu_temperature_celsius"] == 56  # 48 + 7.5, whole degrees as the driver reports


def test_a_replica_without_busy_is_an_idle_gpu():
    gpus = Gpus(CAPTURE, {"r1": f"http://127.0.0.1:{free_port()}/busy"})  # nothing listens there
    for _ in range(2):
        got = recorded_values(gpus.render("r1"))
        assert got["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.004656 and got["DCGM_FI_DEV_POWER_USAGE"] == 40.979
    assert recorded_values(gpus.render("unknown"))["DCGM_FI_DEV_GPU_UTIL"] == 0


def test_the_replica_busy_time_drives_its_gpu(served):
    base, _ = served
    assert httpx.get(f"{base}/busy").json() == {"busy_seconds": 0.0}
    gpus = Gpus(CAPTURE, {"r1": f"{base}/busy"})
    first = recorded_values(gpus.render("r1"))  # the first reading: no interval yet, an idle GPU
    assert first["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.004656
    started = time.perf_counter()
    body = {"prompt": "the boat", "max_tokens": 64}
    httpx.post(f"{base}/predict", json=body, timeout=30).raise_for_status()
    wait_engine_idle()
    took = time.perf_counter() - started
    busy = httpx.get(f"{base}/busy").json()["busy_seconds"]
    assert 0 < busy <= took
    got = recorded_values(gpus.render("r1"))
    gr = got["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert 0 < gr <= 1
    # one level drives the related fields
    assert got["DCGM_FI_DEV_GPU_UTIL"] == round(100 * gr)
    assert got["DCGM_FI_DEV_POWER_USAGE"] == pytest.approx(40.979 + (130 - 40.979) * gr, rel=1e-9)
    assert got["DCGM_FI_DEV_FB_FREE"] + got["DCGM_FI_DEV_FB_USED"] == 20473 - 457
