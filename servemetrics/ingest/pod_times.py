"""A pod's startup timestamps from a kube-state-metrics scrape (``exporters.md`` §5.3; KSM's pod
metrics, every value Unix seconds, labels ``namespace, pod, uid``, and ``container`` for containers).

``pod_times(samples, pod)`` picks the series of the pod named ``pod`` (a replica on Kubernetes is
registered under its pod's name) and returns one ``PodTimes`` per pod ``uid`` seen (a pod replaced under
the same name, as a StatefulSet does, has a new uid): its marks in epoch ms, named as
``registry.startup_marks`` names them, and whether kube-state-metrics shows it ``Failed``. Timestamps
of 0 (kube-state-metrics' value for "not yet") are left out. ``kube_pod_start_time`` (when the kubelet
took the pod, before the image pull) bounds no phase and is not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from servemetrics.samples import Sample

POD_MARKS = {
    "kube_pod_created": "created",
    "kube_pod_status_scheduled_time": "scheduled",
    "kube_pod_container_state_started": "containers_started",
    "kube_pod_status_ready_time": "ready",
}
"""kube-state-metrics gauge -> the mark it gives; a mark given by several containers takes the latest
(the pod's containers have all started then)."""

PHASE = "kube_pod_status_phase"


@dataclass
class PodTimes:
    """One pod (``uid``) of a replica: ``marks`` (mark name -> epoch ms) and ``failed`` (its
    ``kube_pod_status_phase{phase="Failed"}`` is 1)."""

    uid: str
    marks: dict[str, int] = field(default_factory=dict)
    failed: bool = False


def pod_times(samples: Iterable[Sample], pod: str) -> list[PodTimes]:
    """The ``PodTimes`` of every uid of pod ``pod`` in ``samples`` (source samples of one scrape), in
    the order first seen; ``[]`` when the scrape has none (not a kube-state-metrics target)."""
    found: dict[str, PodTimes] = {}
    for s in samples:
        mark = POD_MARKS.get(s.name)
        if mark is None and s.name != PHASE:
            continue
        labels = dict(s.labels)
        if labels.get("pod") != pod:
            continue
        uid = labels.get("uid") or f"{labels.get('namespace', '')}/{pod}"
        times = found.setdefault(uid, PodTimes(uid))
        if mark is None:
            times.failed = times.failed or (labels.get("phase") == "Failed" and s.value == 1)
        elif s.value > 0:
            ms = round(s.value * 1000)
            times.marks[mark] = max(ms, times.marks.get(mark, ms))
    return list(found.values())
