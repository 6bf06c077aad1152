"""Container CPU and working set from cAdvisor (``exporters.md`` §5.1, §5.2).

Three shapes of the same two metrics, each with its own ``source`` so they never share a series:

- ``cadvisor``: the kubelet's ``/metrics/cadvisor`` (has ``id``); the pod cgroup row (``container=""``),
  the pause sandbox (``container=""`` with a pause image, or ``container="POD"``) are skipped.
- ``kubelet_resource``: the kubelet's ``/metrics/resource`` (no ``id``), same skipping.
- ``cadvisor``: standalone cAdvisor (no ``pod``, container name in ``name``).

All three views describe one container, so each rule carries its ``preference`` (cAdvisor 3 over the
kubelet's resource metrics 2 over the process collector's 1, ``process.py``; the catalog's
``CONTAINER_SOURCES`` order): a replica's value comes from the most preferred view only.

The kubelet endpoints cover every pod of a node, so ``namespace`` and ``pod`` are kept with
``container``. Per-CPU rows (``cpu="cpu00"``...) are skipped; only the total (``cpu="total"`` or
no ``cpu``) is kept.
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import NOT_EMPTY, LabelMatch, Rule

_APP_CONTAINER = LabelMatch("container", "|POD", negate=True)
_TOTAL_CPU = LabelMatch("cpu", "|total")
_KUBELET = (_APP_CONTAINER, LabelMatch("id", NOT_EMPTY))
_RESOURCE = (_APP_CONTAINER, LabelMatch("id", ""))
_STANDALONE = (LabelMatch("container", ""), LabelMatch("pod", ""), LabelMatch("name", NOT_EMPTY))
_CPU = "container_cpu_usage_seconds_total"
_MEM = "container_memory_working_set_bytes"
_CPU_T = "baseten_container_cpu_usage_seconds_total"
_MEM_T = "baseten_container_cpu_memory_working_set_bytes"
_KEEP = {"namespace": "namespace", "pod": "pod", "container": "container"}
_NAME = {"name": "container"}

CADVISOR, KUBELET_RESOURCE = 3, 2
"""``Rule.preference`` of the cAdvisor and kubelet resource views (``process.PROCESS`` is 1)."""

RULES: tuple[Rule, ...] = (
    Rule(_CPU, _CPU_T, "cadvisor", _KEEP, (*_KUBELET, _TOTAL_CPU), preference=CADVISOR),
    Rule(_MEM, _MEM_T, "cadvisor", _KEEP, _KUBELET, preference=CADVISOR),
    Rule(_CPU, _CPU_T, "kubelet_resource", _KEEP, (*_RESOURCE, _TOTAL_CPU), preference=KUBELET_RESOURCE),
    Rule(_MEM, _MEM_T, "kubelet_resource", _KEEP, _RESOURCE, preference=KUBELET_RESOURCE),
    Rule(_CPU, _CPU_T, "cadvisor", _NAME, (*_STANDALONE, _TOTAL_CPU), preference=CADVISOR),
    Rule(_MEM, _MEM_T, "cadvisor", _NAME, _STANDALONE, preference=CADVISOR),
)
