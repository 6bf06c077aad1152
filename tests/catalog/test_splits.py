"""The drill-down rules of the catalog (``catalog.splits``): which ``group_by`` each kind of metric takes."""

from __future__ import annotations

from servemetrics.catalog import CATALOG
from servemetrics.catalog.splits import SPLIT_LABELS, Split, splits_of

R, G, D, S = Split.REPLICA, Split.GPU, Split.DEPLOYMENT, Split.STATUS_CODE


def test_hand_picked_metrics_take_the_documented_splits():
    want = {
        "baseten_inference_requests_total": (R, D, S),
        "baseten_async_webhook_requests_total": (R, D, S),
        "baseten_end_to_end_response_time_seconds": (R, D),
        "baseten_replicas_active": (D,),
        "baseten_concurrent_requests": (D,),
        "baseten_pod_readiness": (D,),
        "baseten_container_cpu_usage_seconds_total": (R, D),
        "baseten_gpu_utilization": (R, G, D),
        "baseten_gpu_power_total_watts": (R, G, D),
        "vllm:prefix_cache_hit_rate": (R, D),
    }
    assert {name: splits_of(CATALOG[name]) for name in want} == want


def test_every_metric_takes_deployment_and_only_gpu_metrics_take_gpu():
    assert all(D in splits_of(m) for m in CATALOG.values())
    gpu = sorted(n for n, m in CATALOG.items() if G in splits_of(m))
    assert gpu == sorted(n for n in CATALOG if n.startswith("baseten_gpu_"))
    assert len(gpu) == 10


def test_every_split_names_its_labels():
    assert set(SPLIT_LABELS) == set(Split)
    assert SPLIT_LABELS[G] == ("replica", "gpu")
