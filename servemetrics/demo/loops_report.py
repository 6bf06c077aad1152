"""The demo's trainer (Loops) call and its Rich table: the last point of each field, per node."""

from __future__ import annotations

from typing import Any

import httpx
from rich.table import Table

MIB = 1_048_576


def query(client: httpx.Client, base: str, trainer: str, start_ms: int, end_ms: int) -> dict[str, Any]:
    """``POST /v1/loops/deployments/{trainer}/metrics`` over ``[start_ms, end_ms)`` (requests per
    minute); raises on a non-2xx."""
    body = {"start_epoch_millis": start_ms, "end_epoch_millis": end_ms, "time_divisor_seconds": 60}
    resp = client.post(f"{base}/v1/loops/deployments/{trainer}/metrics", json=body)
    resp.raise_for_status()
    answer: dict[str, Any] = resp.json()
    return answer


def last(points: list[dict[str, Any]], key: str = "value") -> Any:
    """The last non-null ``key`` of a series (None when there is none)."""
    return next((p[key] for p in reversed(points) if p.get(key) is not None), None)


def _fmt(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    """``value / scale`` to ``digits`` significant digits, whole numbers with separators from
    ``10 ** digits`` on (``4,130``, never ``4.13e+03``); ``–`` for None."""
    if value is None:
        return "–"
    v = value / scale
    return f"{v:,.0f}" if abs(v) >= 10**digits else f"{v:.{digits}g}"


def table(body: dict[str, Any]) -> Table:
    """Service-level fields, then one row per node and GPU rank (last non-empty point of each)."""
    m = body["metrics"]
    t = Table(title=f"Loops trainer {body['deployment_id']}: last points", title_justify="left")
    for col in ("field", "node", "rank", "value"):
        t.add_column(col)
    t.add_row("inference_volume (req/min)", "all", "", _fmt(last(m["inference_volume"])))
    t.add_row("concurrent_requests", "all", "", _fmt(last(m["concurrent_requests"])))
    for q in ("p50", "p95", "p99"):
        t.add_row(f"response_time {q} (ms)", "all", "", _fmt(last(m["response_time_stats"], q)))
    for node in m["per_node_metrics"]:
        n = node["node_id"]
        for rank, points in node["gpu_utilization"].items():
            t.add_row("gpu_utilization (0-1)", n, rank, _fmt(last(points)))
        for rank, points in node["gpu_memory_usage_bytes"].items():
            t.add_row("gpu_memory_usage (MiB)", n, rank, _fmt(last(points), MIB))
        t.add_row("cpu_usage (cores)", n, "", _fmt(last(node["cpu_usage"])))
        t.add_row("cpu_memory_usage_bytes", n, "", _fmt(last(node["cpu_memory_usage_bytes"])))
        storage = node["ephemeral_storage"]
        t.add_row("ephemeral_storage usage (GB)", n, "", _fmt(last(storage["usage_bytes"]), 1e9, 4))
        t.add_row("ephemeral_storage utilization", n, "", _fmt(last(storage["utilization"])))
    return t
