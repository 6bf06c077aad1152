"""A pod's startup timestamps from a kube-state-metrics scrape (``exporters.md`` §5.3; KSM's pod
metrics, every value Unix seconds, labels ``namespace, pod, uid``, and ``container`` for containers).

``pod_times(samples, pod)`` picks the series of the pod named ``pod`` (a replica on Kubernetes is
registered under its pod's name) and returns one ``PodTimes`` per pod ``uid`` seen (a pod replaced under
the same name, as a StatefulSet does, has a new uid): its marks in epoch ms, named as
``registry.startup_marks`` names them, and whether kube-state-metrics shows it ``Failed``. Timestamps
of 0 (kube-state-metrics' value for "not yet") are left out. ``kube_pod_start_time`` (when the kubelet
took the pod, before the image pull) bounds no phase and is not read.

``kube_pod_created`` never reaches the samples: the parser takes every ``*_created`` sample for the
creation time of family ``kube_pod`` (``ingest.exposition``), so it is read from ``ParseResult.created``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from servemetrics.samples import Sample
from servemetrics.types import SeriesKey

CREATED_FAMILY = "kube_pod"
"""``kube_pod_created`` as ``ParseResult.created`` keys it: its family name without ``_created``."""
POD_MARKS = {
    "kube_pod_status_scheduled_time": "scheduled",
    "kube_pod_container_state_started": "containers_started",
    "kube_pod_status_ready_time": "ready",
}
"""kube-state-metrics gauge -> the mark it gives (``kube_pod_created`` gives ``created``); a mark given
by several containers takes the latest (the pod's containers have all started then)."""

PHASE = "kube_pod_status_phase"


@dataclass
class PodTimes:
    """One pod (``uid``) of a replica: ``marks`` (mark name -> epoch ms) and ``failed`` (its
    ``kube_pod_status_phase{phase="Failed"}`` is 1)."""

    uid: str
    marks: dict[str, int] = field(default_factory=dict)
    failed: bool = False


def pod_times(samples: Iterable[Sample], pod: str, created: Mapping[SeriesKey, int] = {}) -> list[PodTimes]:
    """The ``PodTimes`` of every uid of pod ``pod`` in ``samples`` (source samples of one scrape) and
    ``created`` (its ``ParseResult.created``), in the order first seen; ``[]`` when the scrape has none
    (not a kube-state-metrics target)."""
    found: dict[str, PodTimes] = {}

    def of(labels: dict[str, str]) -> PodTimes | None:
        if labels.get("pod") != pod:
            return None
        uid = labels.get("uid") or f"{labels.get('namespace', '')}/{pod}"
        return found.setdefault(uid, PodTimes(uid))

    for (family, labels), ms in created.items():
        times = of(dict(labels)) if family == CREATED_FAMILY and ms > 0 else None
        if times is not None:
            times.marks["created"] = ms
    for s in samples:
        mark = POD_MARKS.get(s.name)
        if mark is None and s.name != PHASE:
            continue
        times = of(dict(s.labels))
        if times is None:
            continue
        if mark is None:
            times.failed = times.failed or (dict(s.labels).get("phase") == "Failed" and s.value == 1)
        elif s.value > 0:
            ms = round(s.value * 1000)
            times.marks[mark] = max(ms, times.marks.get(mark, ms))
    return list(found.values())
