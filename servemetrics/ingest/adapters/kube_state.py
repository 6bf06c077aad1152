"""kube-state-metrics (``exporters.md`` §5.3): container restarts and pod readiness per pod."""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        "kube_pod_container_status_restarts_total",
        "baseten_container_restarts_total",
        "kube_state",
        {"namespace": "namespace", "pod": "pod", "container": "container"},
    ),
    Rule(
        "kube_pod_status_ready",
        "baseten_pod_readiness",
        "kube_state",
        {"namespace": "namespace", "pod": "pod", "condition": "condition"},
    ),
)
