"""The hand-computed trainer data set of the Loops tests.

Trainer deployment ``t1``, window ``[T0, T0 + 120 s)`` with 30 s steps: four points at T0 + 0, 30, 60, 90 s
(T0 = 2026-01-01T00:00:00Z). Samples every 15 s from T0 - 15 s to T0 + 105 s. Node ``leader-0`` (leader,
GPU ranks 0 and 1, pod ``trainer-0``) reports throughout; node ``worker-1`` (worker, ranks 0 and 1, no pod
filter) stops after T0 + 45 s. Expected values are written next to the samples that produce them; the
tests hold every field to them.

Counters (DESIGN "counter in a step"): the delta of each pair of consecutive samples (t0, t1] is spread
evenly over (t0, t1], and a point [lo, hi) gets the part inside it. With 15 s samples a point
[lo, lo + 30 s) gets the pairs (lo, lo + 15] and (lo + 15, lo + 30] whole; the pair ending at lo,
(lo - 15, lo], lies before lo and belongs to the point before (so the pair (-15, 0] is outside the
window). Nothing is extrapolated past the last sample: point 3 [90, 120) has only the pair (90, 105].
"""

from __future__ import annotations

from servemetrics.catalog.trainer import EPHEMERAL_AVAILABLE, EPHEMERAL_CAPACITY, EPHEMERAL_USED
from servemetrics.query.loops_plan import LoopsNode
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.types import labels_of
from tests.query.helpers import at

TRAINER = "t1"
LEADER, WORKER = "leader-0", "worker-1"
REQUEST_URL = "http://10.0.0.1:9091/metrics"
ALL = [-15, 0, 15, 30, 45, 60, 75, 90, 105]  # seconds after T0
FIRST_HALF = [-15, 0, 15, 30, 45]
STAMPS = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z", "2026-01-01T00:01:30Z"]
NODES = (
    LoopsNode(LEADER, True, (0, 1), "trainer-0", "loops", (REQUEST_URL,)),
    LoopsNode(WORKER, False, (0, 1)),
)
MIB = 1_048_576


def s(name: str, node: str, points: list[tuple[int, float]], **labels: str) -> list[Sample]:
    """Samples of one trainer series of ``node`` from ``(seconds after T0, value)``."""
    lab = labels_of({"deployment_id": TRAINER, "node_id": node, **labels})
    return [Sample(name, lab, float(v), at(t)) for t, v in points]


def const(value: float, times: list[int] = ALL) -> list[tuple[int, float]]:
    return [(t, value) for t in times]


def _gpu() -> list[Sample]:
    mem, util = "baseten_gpu_memory_used", "baseten_gpu_utilization"
    return [
        # leader rank 0: point 0 = mean(1000, 2000) = 1500 MiB; point 1 = 3000; points 2, 3 = 4000 (the
        # sample at -15 s lies before the window)
        *s(
            mem,
            LEADER,
            [(-15, 9), (0, 1000), (15, 2000), (30, 3000), (45, 3000), *const(4000, ALL[5:])],
            gpu="0",
            source="dcgm",
        ),
        *s(mem, LEADER, const(512), gpu="1", source="dcgm"),  # 512 MiB = 536,870,912 B everywhere
        # leader utilisation rank 0: point 0 = mean(0.5, 0.7) = 0.6, then 0.9; rank 1: 0.25
        *s(util, LEADER, [(0, 0.5), (15, 0.7), *const(0.9, ALL[3:])], gpu="0", source="dcgm"),
        *s(util, LEADER, const(0.25), gpu="1", source="dcgm"),
        # worker rank 0 is split into two MIG instances: memory 100 + 300 = 400 MiB, utilisation
        # mean(0.2, 0.4) = 0.3; rank 1: 100 MiB, 0.5. Nothing after 45 s: points 2, 3 are gaps.
        *s(mem, WORKER, const(100, FIRST_HALF), gpu="0", gpu_instance="1", source="dcgm"),
        *s(mem, WORKER, const(300, FIRST_HALF), gpu="0", gpu_instance="2", source="dcgm"),
        *s(mem, WORKER, const(100, FIRST_HALF), gpu="1", source="dcgm"),
        *s(util, WORKER, const(0.2, FIRST_HALF), gpu="0", gpu_instance="1", source="dcgm"),
        *s(util, WORKER, const(0.4, FIRST_HALF), gpu="0", gpu_instance="2", source="dcgm"),
        *s(util, WORKER, const(0.5, FIRST_HALF), gpu="1", source="dcgm"),
    ]


def _kubelet() -> list[Sample]:
    cpu, mem = "baseten_container_cpu_usage_seconds_total", "baseten_container_cpu_memory_working_set_bytes"
    pod = {"pod": "trainer-0", "namespace": "loops", "source": "cadvisor"}
    other = {"pod": "other", "namespace": "loops", "source": "cadvisor"}
    return [
        # leader CPU: trainer 3 CPU-s/s + sidecar 0.5 CPU-s/s = 3.5 cores; each 15 s pair adds
        # 45 + 7.5 = 52.5 CPU-s. Points 0-2 [lo, lo + 30): pairs (lo, lo + 15], (lo + 15, lo + 30] whole:
        # 2 x 52.5 / 30 = 3.5; point 3 [90, 120): pair (90, 105] only (no sample at 120): 15 s of
        # 3.5 cores / 30 s = 52.5 / 30 = 1.75. Pod "other" (10 cores) is not the trainer's
        *s(cpu, LEADER, [(t, 3.0 * (t + 15)) for t in ALL], container="trainer", **pod),
        *s(cpu, LEADER, [(t, 0.5 * (t + 15)) for t in ALL], container="sidecar", **pod),
        *s(cpu, LEADER, [(t, 10.0 * (t + 15)) for t in ALL], container="app", **other),
        # leader memory: 2e9 + 1e8 = 2.1e9 B (pod "other" excluded)
        *s(mem, LEADER, const(2e9), container="trainer", **pod),
        *s(mem, LEADER, const(1e8), container="sidecar", **pod),
        *s(mem, LEADER, const(5e9), container="app", **other),
        # worker (no pod filter): 1 core, 4e9 B, until 45 s. CPU point 0 [0, 30): pairs (0, 15], (15, 30]:
        # 30 CPU-s / 30 = 1.0; point 1 [30, 60): pair (30, 45] only (no sample after 45 s): 15 CPU-s / 30
        # = 0.5 (the covered half); points 2, 3: no sample and no pair covering them: gaps, not 0
        *s(cpu, WORKER, [(t, 1.0 * (t + 15)) for t in FIRST_HALF], container="trainer", source="cadvisor"),
        *s(mem, WORKER, const(4e9, FIRST_HALF), container="trainer", source="cadvisor"),
    ]


def _storage() -> list[Sample]:
    pod = {"pod": "trainer-0", "namespace": "loops", "source": "kubelet_summary"}
    other = {"pod": "other", "namespace": "loops", "source": "kubelet_summary"}
    host = {"source": "node_exporter"}
    return [
        # leader from the Summary API: used 1e9 of 1e11 -> utilisation 0.01 (pod "other" excluded)
        *s(EPHEMERAL_USED, LEADER, const(1e9), **pod),
        *s(EPHEMERAL_CAPACITY, LEADER, const(1e11), **pod),
        *s(EPHEMERAL_AVAILABLE, LEADER, const(6e10), **pod),
        *s(EPHEMERAL_USED, LEADER, const(7e9), **other),
        *s(EPHEMERAL_CAPACITY, LEADER, const(1e11), **other),
        # worker from node_exporter: used = 2e11 - 1.5e11 = 5e10, utilisation 0.25, until 45 s
        *s(EPHEMERAL_CAPACITY, WORKER, const(2e11, FIRST_HALF), **host),
        *s(EPHEMERAL_AVAILABLE, WORKER, const(1.5e11, FIRST_HALF), **host),
    ]


def _requests() -> list[Sample]:
    reqs, e2e = "baseten_inference_requests_total", "baseten_end_to_end_response_time_seconds"
    kn = {"source": "knative"}
    # the counters read 0 at -15 s and 0 s, then 60 x 200, 3 x 404, 6 x 500 from 15 s: every request is
    # in the pair (0, 15], wholly inside point 0 (the pair (-15, 0] adds 0, before the window).
    # Point 0 [0, 30): pairs (0, 15] (69) + (15, 30] (0) = 69 requests / 30 s = 2.3 req/s (60 / 30 = 2,
    # 3 / 30 = 0.1, 6 / 30 = 0.2 by class); point 1 [30, 60): pair (30, 45] flat -> 0 (no sample at
    # 60 s: no pair (45, 60]); points 2, 3: the series are gone (Knative drops idle series), no pair
    # covers them, but the request target is up -> 0
    before = [(-15, 0), (0, 0)]
    out = [
        *s(reqs, LEADER, [*before, *const(60, FIRST_HALF[2:])], status_code="200", **kn),
        *s(reqs, LEADER, [*before, *const(3, FIRST_HALF[2:])], status_code="404", **kn),
        *s(reqs, LEADER, [*before, *const(6, FIRST_HALF[2:])], status_code="500", **kn),
        # queue depth: point 0 = mean(2, 4) = 3, then 1
        *s("baseten_concurrent_requests", LEADER, [(0, 2), (15, 4), *const(1, ALL[3:])], **kn),
    ]
    # buckets (cumulative): le 0.1 -> 20, 0.5 -> 60, 1 -> 66, +Inf -> 69, all in the pair (0, 15] of
    # point 0 (0 at -15 s and 0 s, as the request counters); point 1: pair (30, 45] flat -> no requests.
    # p50: rank 34.5 in (0.1, 0.5]: 0.1 + 0.4 * (34.5 - 20) / 40 = 0.245 s = 245 ms
    # p95: rank 65.55 in (0.5, 1]: 0.5 + 0.5 * (65.55 - 60) / 6 = 0.9625 s = 962.5 ms
    # p99: rank 68.31 in +Inf -> highest finite bound 1 s = 1000 ms
    for le, n in (("0.1", 20), ("0.5", 60), ("1.0", 66), ("+Inf", 69)):
        out += s(e2e + "_bucket", LEADER, [*before, *const(n, FIRST_HALF[2:])], le=le, **kn)
    out += s(e2e + "_count", LEADER, [*before, *const(69, FIRST_HALF[2:])], **kn)
    out += s(e2e + "_sum", LEADER, [*before, *const(30.0, FIRST_HALF[2:])], **kn)
    out += s("up", LEADER, const(1), instance=REQUEST_URL)
    out += s("up", LEADER, const(1), instance="http://10.0.0.1:9400/metrics")
    out += s("up", WORKER, const(1, FIRST_HALF), instance="http://10.0.0.2:9400/metrics")
    return out


def samples() -> list[Sample]:
    """Every sample of the data set."""
    return [*_gpu(), *_kubelet(), *_storage(), *_requests()]


def load(store: Store) -> Store:
    """``store`` with the data set appended."""
    store.append(SampleBatch.from_samples(samples()))
    return store
