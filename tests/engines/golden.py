"""The golden data set of the engine tests: three replicas over four minutes, a promotion, and the bound
Prometheus' extrapolating ``increase`` keeps to (docs/store.md, "Prometheus-compatible engines").

Every series is sampled every 5 s at ``B - 60 s, B - 55 s, ..., B + 175 s`` (``B`` a whole hour in the
past, inside every engine's out-of-order window). ``production`` is served by ``d1`` (replicas r1, r2)
until ``B + 100 s`` and by ``d2`` (r3) from then on. The SERIES window ``[B + 10 s, B + 180 s)`` has a
30 s step, so the value sets are ``[10,30) [30,60) [60,90) [90,100)`` (d1) and ``[100,120) [120,150)
[150,180)`` (d2): a ragged first set and a promotion split.

CPU and working set (C13, one container, one value) come in several views per replica (the ``source``
label): r1 from cAdvisor and the kubelet's resource metrics (different numbers, so a sum or a mean would
show), r2 from cAdvisor until ``B + 50 s`` and the process collector throughout, r3 from the process
collector only. Each replica's value in a value set is its most preferred view with data there.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from servemetrics.samples import Sample, SampleBatch
from servemetrics.types import labels_of

REQ = "baseten_inference_requests_total"
UTIL = "baseten_gpu_utilization"
REPLICAS = "baseten_replicas_active"
LATENCY = "baseten_end_to_end_response_time_seconds"
CPU = "baseten_container_cpu_usage_seconds_total"
MEM = "baseten_container_cpu_memory_working_set_bytes"
METRICS = [REPLICAS, UTIL, REQ, LATENCY, CPU, MEM]
COUNTERS = (REQ, CPU)
VIEWS = {  # replica -> (source, CPU cores, working set bytes, last second with samples or None)
    "r1": (("cadvisor", 1.0, 1.0e9, None), ("kubelet_resource", 0.8, 1.1e9, None)),
    "r2": (("cadvisor", 0.6, 0.6e9, 50), ("process", 0.4, 0.8e9, None)),
    "r3": (("process", 2.0, 2.0e9, None),),
}
KEY = "sm-golden-key"
STEP_S = 5
TIMES = range(-60, 180, STEP_S)
PROMOTION_S = 100


def base_ms() -> int:
    """``B``: the whole hour two hours before now, in epoch ms."""
    return (int(time.time() * 1000) // 3_600_000 - 2) * 3_600_000


def requests_200(replica: str, t: int) -> float:
    """The 2xx counter of a replica at ``B + t`` s: r1 +10 per 5 s up to 50 s then +40 per 5 s; r2 +5 per
    5 s and reset to 3 at 70 s (then +5 again); r3 +20 per 5 s."""
    k = (t + 60) // STEP_S  # samples since B - 60 s
    if replica == "r1":
        return 1000 + 10 * min(k, 22) + 40 * max(0, k - 22)  # k = 22 at t = 50 s
    if replica == "r2":
        return 500 + 5 * k if t < 70 else 3 + 5 * ((t - 70) // STEP_S)
    return 2000 + 20 * k


BUCKETS = {  # per replica: (start, increase per 5 s) of le 0.1, 0.5, 1, +Inf; then _sum and _count steps
    "r1": ((100, 1), (200, 3), (300, 4), (300, 4)),
    "r2": ((100, 0), (200, 2), (300, 2), (300, 2)),
    "r3": ((100, 2), (200, 2), (300, 6), (300, 6)),
}
LES = ("0.1", "0.5", "1", "+Inf")


def samples(model_id: str, b_ms: int) -> SampleBatch:
    """Every sample of the data set for ``model_id`` (module docstring)."""
    out: list[Sample] = []
    for dep, replica in (("d1", "r1"), ("d1", "r2"), ("d2", "r3")):
        base = {"model_id": model_id, "deployment_id": dep, "replica": replica}

        def add(name: str, value: float, t: int, base: dict[str, str] = base, **extra: str) -> None:
            out.append(Sample(name, labels_of({**base, **extra}), float(value), b_ms + t * 1000))

        for t in TIMES:
            k = (t + 60) // STEP_S
            add("up", 1, t)
            add(REQ, requests_200(replica, t), t, status_code="200")
            add(REQ, 10 + k, t, status_code="503")  # +1 per 5 s
            add(UTIL, (0.25, 0.5, 0.75, 0.1)[k % 4] + (0.05 if replica == "r2" else 0.0), t)
            for le, (start, inc) in zip(LES, BUCKETS[replica], strict=True):
                add(LATENCY + "_bucket", start + inc * k, t, le=le)
            add(LATENCY + "_sum", 50 + 0.5 * BUCKETS[replica][3][1] * k, t)
            add(LATENCY + "_count", 300 + BUCKETS[replica][3][1] * k, t)
            for source, cores, working_set, until in VIEWS[replica]:
                if until is None or t <= until:
                    add(CPU, 100 + cores * STEP_S * k, t, source=source)
                    add(MEM, working_set, t, source=source)
    for dep, value in (("d1", 2), ("d2", 1)):
        lab = labels_of({"model_id": model_id, "deployment_id": dep})
        out.extend(Sample(REPLICAS, lab, float(value), b_ms + t * 1000) for t in TIMES)
    return SampleBatch.from_samples(out)


def config_data(model_id: str, b_ms: int, data_dir: str) -> dict[str, object]:
    """A config: one organization with ``KEY``, the model, d1 from B - 1 h, d2 from B + 100 s."""

    def iso(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")

    return {
        "data_dir": data_dir,
        "organizations": [{"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}],
        "models": [
            {
                "id": model_id,
                "organization": "acme",
                "deployments": [{"id": "d1"}, {"id": "d2"}],
                "environments": [
                    {
                        "name": "production",
                        "promotions": [
                            {"deployment": "d1", "at": iso(b_ms - 3_600_000)},
                            {"deployment": "d2", "at": iso(b_ms + PROMOTION_S * 1000)},
                        ],
                    }
                ],
            }
        ],
    }


def prometheus_increase_bound(
    series_values: list[tuple[int, float]], lo_s: int, hi_s: int
) -> tuple[float, float]:
    """``(lower, upper)`` of Prometheus ``increase`` minus the store's increase for one series in
    ``[lo_s, hi_s)`` (docs/store.md): ``-(p_lo + p_hi)`` (the parts inside the value set of the pairs
    straddling its edges, which the store spreads in and Prometheus leaves out) and ``I * (w - sampled)
    / sampled`` (the increase ``I`` between the samples inside, scaled up to the width ``w`` at most).
    Samples are ``(t seconds, value)``."""

    def delta(a: float, b: float) -> float:
        return b - a if b >= a else b

    inside = [(t, v) for t, v in series_values if lo_s <= t < hi_s]
    before = [(t, v) for t, v in series_values if t < lo_s]
    after = [(t, v) for t, v in series_values if t >= hi_s]
    if not inside:
        return 0.0, 0.0
    p_lo = p_hi = 0.0
    if before:
        (t0, v0), (t1, v1) = before[-1], inside[0]
        p_lo = delta(v0, v1) * (t1 - lo_s) / (t1 - t0)
    if after:
        (t0, v0), (t1, v1) = inside[-1], after[0]
        p_hi = delta(v0, v1) * (hi_s - t0) / (t1 - t0)
    if len(inside) < 2:
        return -(p_lo + p_hi), 0.0
    inc = sum(delta(a, b) for (_, a), (_, b) in zip(inside, inside[1:], strict=False))
    sampled = inside[-1][0] - inside[0][0]
    return -(p_lo + p_hi), inc * (hi_s - lo_s - sampled) / sampled
