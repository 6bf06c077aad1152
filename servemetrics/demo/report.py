"""Metrics API calls of the demo and their Rich tables (metric, label set, value; SERIES: the last steps)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
from rich.table import Table

SUMMARY_METRICS = [
    "baseten_inference_requests_total",
    "baseten_incoming_inference_requests_total",
    "baseten_end_to_end_response_time_seconds",
    "baseten_time_to_first_byte_seconds",
    "baseten_request_size_bytes",
    "baseten_concurrent_requests",
    "baseten_replicas_active",
    "baseten_replicas_desired",
    "baseten_container_cpu_usage_seconds_total",
    "baseten_container_cpu_memory_working_set_bytes",
    "baseten_gpu_utilization",
    "baseten_gpu_memory_used",
]
ASYNC_METRICS = [
    "baseten_async_queue_size",
    "baseten_time_in_async_queue_seconds",
    "baseten_async_webhook_requests_total",
    "baseten_async_webhook_latency_seconds",
]
ENGINE_METRICS: dict[str, list[str]] = {
    "vllm": [
        "vllm:output_tokens_per_second",
        "vllm:decode_tokens_per_second",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prefix_cache_hit_rate",
    ],
    "sglang": [
        "sglang:output_tokens_per_second",
        "sglang:decode_tokens_per_second",
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:token_usage",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:prefix_cache_hit_rate",
    ],
}
"""Engine metrics of a deployment's SUMMARY table, by the engine format its replicas expose: token
speed, TTFT, inter-token latency, KV-cache usage, running / waiting and the prefix-cache hit rate."""
SERIES_METRICS = [
    "baseten_inference_requests_total",
    "baseten_end_to_end_response_time_seconds",
    "baseten_container_cpu_usage_seconds_total",
]


def query(
    client: httpx.Client,
    url: str,
    mode: str,
    metrics: list[str] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> dict[str, Any]:
    """GET ``url`` (an environment's ``…/metrics``) with these parameters; raises on a non-2xx."""
    params: list[tuple[str, str | int | float | bool | None]] = [("mode", mode)]
    params += [("metrics", m) for m in metrics or []]
    if start_ms is not None:
        params.append(("start_epoch_millis", start_ms))
    if end_ms is not None:
        params.append(("end_epoch_millis", end_ms))
    resp = client.get(url, params=params)
    resp.raise_for_status()
    body: dict[str, Any] = resp.json()
    return body


def values(body: dict[str, Any], step: int = -1) -> dict[tuple[str, str], float | None]:
    """``(metric, "k=v")`` -> value in value set ``step`` (the last by default)."""
    sets = body["metric_values"]
    if not sets:
        return {}
    out = {}
    for d, row in zip(body["metric_descriptors"], sets[step]["values"], strict=True):
        for labels, v in zip(d["label_sets"], row, strict=True):
            out[(d["name"], _labels(labels))] = v
    return out


def _labels(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "-"


def fmt(value: float | None, unit: str, name: str = "") -> str:
    """A value for a table: ``null``, seconds in ms, bytes in KiB/MiB, GPU ratios in %, CPU in cores, °C,
    W, clocks in MHz, rates per second."""
    if value is None:
        return "null"
    if unit == "SECONDS":
        return f"{value * 1000:.1f} ms"
    if unit == "BYTES":
        return f"{value / 2**20:.1f} MiB" if value >= 2**20 else f"{value / 1024:.1f} KiB"
    if unit == "RATIO":
        return f"{value:.3f} cores" if "cpu" in name else f"{value * 100:.1f} %"
    if unit == "MEBIBYTES":
        return f"{value:.1f} MiB"
    if unit == "CELSIUS":
        return f"{value:.1f} °C"
    if unit == "WATTS":
        return f"{value:.1f} W"
    if unit == "PER_SECOND" and name.endswith("_hertz"):
        return f"{value / 1e6:.0f} MHz"
    if unit == "PER_SECOND":
        return f"{value:.4g} /s"
    return f"{value:.4g}"


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def table(body: dict[str, Any], title: str, last_steps: int = 4) -> Table:
    """metric | label set | value, or one value column per step for the last ``last_steps`` of a SERIES."""
    sets = body["metric_values"][-last_steps:] if body["mode"] == "SERIES" else body["metric_values"][-1:]
    window = f"{_time(body['start_epoch_millis'])}-{_time(body['end_epoch_millis'])} UTC"
    out = Table(title=f"{title} ({window})", title_justify="left")
    out.add_column("metric")
    out.add_column("label set")
    for s in sets:
        out.add_column(
            _time(s["start_epoch_millis"]) if body["mode"] == "SERIES" else "value", justify="right"
        )
    for i, d in enumerate(body["metric_descriptors"]):
        for j, labels in enumerate(d["label_sets"]):
            name = d["name"].removeprefix("baseten_")
            out.add_row(name, _labels(labels), *(fmt(s["values"][i][j], d["unit_hint"], name) for s in sets))
    return out


def agreement(
    counts: dict[str, int],
    webhooks: list[dict[str, Any]],
    summary: dict[str, Any],
    model_api: dict[str, int] | None = None,
) -> str:
    """One line comparing the requests the demo's client counted with the environment's SUMMARY of
    ``baseten_inference_requests_total``: sync answers by status class, plus each queued (async) request
    whose webhook reported no error as a 2xx (the gateway counts its execution there), plus the Model
    API calls the gateway sent on to the environment's replicas (``model_api``: by status class, the
    teams' rate-limited 429s left out, as they never reach the deployment)."""
    delivered = sum(1 for hook in webhooks if not hook.get("errors"))
    extra = model_api or {}
    client = {
        c: counts.get(c, 0) + extra.get(c, 0) + (delivered if c == "2xx" else 0)
        for c in ("2xx", "4xx", "5xx")
    }
    got = values(summary)
    served = {c: got.get(("baseten_inference_requests_total", f"status={c}")) for c in client}
    same = all(served[c] is not None and round(served[c] or 0.0, 6) == n for c, n in client.items())
    shown = ", ".join(f"{c} {n}" for c, n in client.items())
    told = ", ".join(f"{c} {served[c]:g}" if served[c] is not None else f"{c} null" for c in client)
    calls = f", Model API calls {sum(extra.values())}" if model_api is not None else ""
    return (
        f"requests counted by the client: {shown} (async delivered {delivered}{calls}); "
        f"SUMMARY: {told}: {'equal' if same else 'DIFFERENT'}"
    )
