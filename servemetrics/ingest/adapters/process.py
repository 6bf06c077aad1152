"""prometheus_client's default process collector: the CPU and memory of a plain Python replica.

The least preferred view of a replica's container (``preference`` 1, below cAdvisor and the kubelet's
resource metrics, ``cadvisor.py``): used only for a replica no other view reports.
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

PROCESS = 1
"""``Rule.preference`` of the process collector's view (``cadvisor.CADVISOR`` 3, ``KUBELET_RESOURCE`` 2)."""

RULES: tuple[Rule, ...] = (
    Rule(
        "process_cpu_seconds_total",
        "baseten_container_cpu_usage_seconds_total",
        "process",
        preference=PROCESS,
    ),
    Rule(
        "process_resident_memory_bytes",
        "baseten_container_cpu_memory_working_set_bytes",
        "process",
        preference=PROCESS,
    ),
)
