"""prometheus_client's default process collector: the CPU and memory of a plain Python replica."""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

RULES: tuple[Rule, ...] = (
    Rule("process_cpu_seconds_total", "baseten_container_cpu_usage_seconds_total", "process"),
    Rule("process_resident_memory_bytes", "baseten_container_cpu_memory_working_set_bytes", "process"),
)
