"""GPU power, SM clock and memory health from dcgm-exporter text (issue 16 part 3), through the adapter
and the metrics API on both stores: one replica with two GPUs, values chosen by hand.

GPU 0 draws 40 W and GPU 1 60 W (mean 50 W, total 100 W), both at 2460 MHz (2.46e9 Hz); over the minute
GPU 0's correctable remapped rows go 0 -> 2 and GPU 1's uncorrectable 0 -> 1; GPU 1's row remapping
failed (flag 1), GPU 0's did not (0): half the GPUs, 0.5."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.catalog import CATALOG
from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.samples import SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import at

KEY = "sm-gpu-key"
METRICS = [
    "baseten_gpu_power_usage_watts",
    "baseten_gpu_power_total_watts",
    "baseten_gpu_sm_clock_hertz",
    "baseten_gpu_remapped_rows_total",
    "baseten_gpu_row_remap_failure",
]
WINDOW = {"start_epoch_millis": at(0), "end_epoch_millis": at(60)}
TARGET = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}


def _scrape(t_s: float, rows: tuple[int, int]) -> list:
    text = "".join(
        f'DCGM_FI_DEV_POWER_USAGE{{gpu="{g}"}} {w}\n'
        f'DCGM_FI_DEV_SM_CLOCK{{gpu="{g}"}} 2460\n'
        f'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{{gpu="{g}"}} {rows[0] if g == 0 else 0}\n'
        f'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{gpu="{g}"}} {rows[1] if g == 1 else 0}\n'
        f'DCGM_FI_DEV_ROW_REMAP_FAILURE{{gpu="{g}"}} {g}\n'
        for g, w in ((0, 40.0), (1, 60.0))
    )
    parsed = parse_exposition(text.encode(), "text/plain; version=0.0.4", at(t_s))
    return adapt(parsed.samples, TARGET)


@pytest.fixture(params=["memory", "duckdb"])
def client(request, tmp_path, serve: Serve) -> TestClient:
    store: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "s.duckdb")
    samples = [s for t, rows in ((0, (0, 0)), (30, (1, 0)), (60, (2, 1))) for s in _scrape(t, rows)]
    store.append(SampleBatch.from_samples(samples))
    declarations = {
        "organizations": [org("acme", {KEY: "WORKSPACE_MANAGE_ALL"})],
        "models": [{"id": "m1", "organization": "acme", "deployments": [{"id": "d1"}]}],
    }
    return serve(declarations, gateway=False, clock=lambda: at(60), store=store)


def test_power_clock_and_memory_health_summary(client):
    resp = client.get(
        "/v1/models/m1/deployments/d1/metrics",
        params={
            "mode": "SUMMARY",
            "metrics": METRICS,
            "start_epoch_millis": at(0),
            "end_epoch_millis": at(60),
        },
        headers={"Authorization": f"Api-Key {KEY}"},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    got = {
        d["name"]: dict(zip([tuple(sorted(ls.items())) for ls in d["label_sets"]], vals, strict=True))
        for d, vals in zip(body["metric_descriptors"], body["metric_values"][-1]["values"], strict=True)
    }
    assert got["baseten_gpu_power_usage_watts"] == {(): 50.0}
    assert got["baseten_gpu_power_total_watts"] == {(): 100.0}
    assert got["baseten_gpu_sm_clock_hertz"] == {(): 2.46e9}
    assert got["baseten_gpu_remapped_rows_total"] == {
        (("rows", "correctable"),): 2.0,
        (("rows", "uncorrectable"),): 1.0,
    }
    assert got["baseten_gpu_row_remap_failure"] == {(): 0.5}
    hints = {d["name"]: d["unit_hint"] for d in body["metric_descriptors"]}
    assert hints["baseten_gpu_power_usage_watts"] == hints["baseten_gpu_power_total_watts"] == "WATTS"
    assert hints["baseten_gpu_sm_clock_hertz"] == "PER_SECOND"


def test_the_catalog_lists_them_hidden_in_their_panels():
    panels = {n: (CATALOG[n].panel, CATALOG[n].default_visible) for n in METRICS}
    assert panels == {
        "baseten_gpu_power_usage_watts": ("GPU power", False),
        "baseten_gpu_power_total_watts": ("GPU power", False),
        "baseten_gpu_sm_clock_hertz": ("GPU SM clock", False),
        "baseten_gpu_remapped_rows_total": ("GPU memory health", False),
        "baseten_gpu_row_remap_failure": ("GPU memory health", False),
    }
