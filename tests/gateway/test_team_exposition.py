"""``GatewayMetrics.exposition_of`` for a team's key: no sample of another team's Model API series, every
sample without a ``team_id`` kept (what ``GET /gateway/metrics`` answers such a key)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from servemetrics.gateway.metrics import GatewayMetrics
from servemetrics.gateway.model_api_metrics import ApiLabels, ModelApiMetrics


def _teams(text: bytes) -> dict[str, set[str]]:
    """Sample name -> the ``team_id`` values of its samples (``-`` for none), of model m1's."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out.setdefault(s.name, set()).add(s.labels.get("team_id", "-"))
    return out


def test_a_teams_exposition_leaves_out_other_teams_and_keeps_the_rest() -> None:
    gateway = GatewayMetrics(lambda: ())
    apis = ModelApiMetrics(gateway.registry)
    for team, n in (("team-a", 3), ("team-b", 2), ("", 1)):
        for _ in range(n):
            apis.arrived(ApiLabels("chat", team, "m1", "d1"))
    gateway.requests.labels(
        model_id="m1",
        model_name="m1",
        deployment_id="d1",
        environment="",
        rollout_phase="",
        status_code="200",
        is_async="false",
    ).inc()
    name = "baseten_model_api_incoming_inference_requests_total"
    everyone = _teams(gateway.exposition_of(frozenset({"m1"})))
    team_b = _teams(gateway.exposition_of(frozenset({"m1"}), "team-b"))
    assert everyone[name] == {"team-a", "team-b", ""}
    assert team_b[name] == {"team-b"}
    assert team_b["baseten_inference_requests_total"] == {"-"}  # not a Model API series: kept
