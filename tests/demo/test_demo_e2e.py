"""`servemetrics demo --duration 120` as a real subprocess: the API it feeds, the promotion, a clean exit.

While the demo runs, the test records the demo's child processes (from /proc), waits for the rolling
promotion's PROMOTED event, and after the promotion reached 100 % (40 s later) checks its events (the
start, the 50 % and 100 % steps, the end) and queries the environment:
every default metric and the request, replica, CPU, GPU (and async, when the route exists) metrics are
non-null, and the SERIES has a value set starting at the PROMOTED event's instant. Each deployment's
engine metrics (d1's replicas expose vLLM's format, d2's SGLang's) shown by default are non-null over
the run: decode tokens/s (at most 1 / the replica's per-token delay), TTFT, inter-token latency,
KV-cache usage, running and waiting, and the prefix cache has hits (the load repeats prompts); so are
the ``baseten_llm_*`` metrics adapted from them, whose decode tokens/s is the engine's own. The
trainer (Loops) endpoint answers with data for both nodes and their two GPU ranks, and requests with
latencies. The Model API ``demo-chat`` (issue 17 part 6), called by teams ``research`` and ``support``
with the ``openai`` client: its series move per team (answers, tokens of each type, TTFT, decode
tokens/s), support's rate-limited counter rises in the SERIES and research's stays 0; at the end the
demo's printed figures per team, the client's against the service's SUMMARY, are equal: the rate-limited
counter is the 429s the client saw, the tokens the client's ``usage`` sums. Then the demo must exit 0 on
its own and leave none of its children running.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import httpx
import pytest

from servemetrics.catalog import DEFAULT_METRICS
from servemetrics.demo.load import has_async_route
from tests.conftest import schema_validator
from tests.processes import free_port, start, wait_for_scrapes, wait_until

pytestmark = pytest.mark.e2e
KEY = "demo-test-key"
DURATION_S = 120
REQUIRED = [
    "baseten_inference_requests_total",
    "baseten_incoming_inference_requests_total",
    "baseten_replicas_active",
    "baseten_replicas_desired",
    "baseten_container_cpu_usage_seconds_total",
    "baseten_container_cpu_memory_working_set_bytes",
    "baseten_gpu_utilization",
    "baseten_gpu_memory_used",
]
ENGINE = {
    "d1": ("vllm", "kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", 100.0),
    "d2": ("sglang", "token_usage", "num_running_reqs", "num_queue_reqs", 40.0),
}
"""Deployment -> engine prefix, its KV-cache usage, running and waiting gauges, and the most decode
tokens/s its replicas can stream (1 / 10 ms, 1 / 25 ms between tokens)."""
ASYNC = [
    "baseten_async_queue_size",
    "baseten_time_in_async_queue_seconds",
    "baseten_async_webhook_requests_total",
    "baseten_async_webhook_latency_seconds",
]


def _children(pid: int) -> set[int]:
    """Direct children of ``pid`` now (from /proc/<n>/stat: field 4 is the parent)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _targets(base: str) -> int:
    """The targets the service scrapes (its own ``servemetrics_scrape_duration_seconds`` series)."""
    text = httpx.get(f"{base}/service/metrics", timeout=10).text
    return sum(
        1 for line in text.splitlines() if line.startswith("servemetrics_scrape_duration_seconds_count")
    )


def _nulls(body: dict) -> list[str]:
    """``metric{labels}`` of every null value in the last value set."""
    row = body["metric_values"][-1]["values"]
    return [
        f"{d['name']}{labels}"
        for d, values in zip(body["metric_descriptors"], row, strict=True)
        for labels, v in zip(d["label_sets"], values, strict=True)
        if v is None
    ]


def _check_loops(client: httpx.Client, base: str, window: dict[str, int]) -> None:
    """The demo trainer's metrics: requests, latencies, and every compute field of both nodes."""
    listed = client.get(f"{base}/v1/loops/deployments").json()["deployments"]
    assert [d["id"] for d in listed] == ["demo-trainer"]
    resp = client.post(f"{base}/v1/loops/deployments/demo-trainer/metrics", json=window)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    schema_validator("GetLoopsDeploymentMetricsResponseV1").validate(body)
    m = body["metrics"]
    assert any(p["value"] > 0 for p in m["inference_volume"])  # about 1 training step a second
    assert any(p["status_2xx"] > 0 for p in m["inference_volume_by_status"])
    assert any(p["p50"] is not None for p in m["response_time_stats"])
    assert [n["node_id"] for n in m["per_node_metrics"]] == ["leader-0", "worker-1"]
    for node in m["per_node_metrics"]:
        for field in ("gpu_memory_usage_bytes", "gpu_utilization"):
            assert list(node[field]) == ["0", "1"] and all(node[field].values()), (node["node_id"], field)
        assert node["cpu_usage"] and node["cpu_memory_usage_bytes"], node["node_id"]
        assert node["ephemeral_storage"]["usage_bytes"] and node["ephemeral_storage"]["utilization"]
    assert m["cpu_usage"] == m["per_node_metrics"][0]["cpu_usage"]  # the leader's


def _check_engines(client: httpx.Client, base: str, window: dict[str, int]) -> None:
    """The shown-by-default engine metrics of each deployment, non-null over the run, through the API."""
    for dep, (engine, kv, running, waiting, most) in ENGINE.items():
        names = ["decode_tokens_per_second", "output_tokens_per_second", "time_to_first_token_seconds"]
        names += ["inter_token_latency_seconds", kv, running, waiting, "prefix_cache_hit_rate"]
        metrics = [f"{engine}:{n}" for n in names]
        resp = client.get(
            f"{base}/v1/models/demo-model/deployments/{dep}/metrics",
            params={"mode": "SUMMARY", "metrics": metrics, **window},
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert [d["name"] for d in body["metric_descriptors"]] == metrics
        assert _nulls(body) == [], dep
        got = dict(zip(metrics, body["metric_values"][-1]["values"], strict=True))
        speed = got[f"{engine}:decode_tokens_per_second"][0]  # {stat: avg} = 1 / mean(ITL)
        assert 0 < speed <= most, (dep, speed)
        assert got[f"{engine}:prefix_cache_hit_rate"][0] > 0, dep  # repeated prompts hit
        assert 0 < got[f"{engine}:{kv}"][0] < 1, dep
        _check_llm(client, f"{base}/v1/models/demo-model/deployments/{dep}/metrics", window, speed)


LLM = [
    "baseten_llm_input_tokens_total",
    "baseten_llm_output_tokens_total",
    "baseten_llm_time_to_first_token_seconds",
    "baseten_llm_time_per_output_token_seconds",
    "baseten_llm_num_requests",
    "baseten_llm_output_tokens_per_second",
    "baseten_llm_decode_tokens_per_second",
]
"""The ``baseten_llm_*`` metrics the adapters derive from vLLM's and SGLang's series (catalog/llm.py)."""


def _check_llm(client: httpx.Client, url: str, window: dict[str, int], engine_speed: float) -> None:
    """One deployment's ``LLM`` metrics non-null, adapted from its engine's series: its decode tokens/s
    is the engine's own (both invert the one inter-token latency histogram)."""
    resp = client.get(url, params={"mode": "SUMMARY", "metrics": LLM, **window})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [d["name"] for d in body["metric_descriptors"]] == LLM
    assert _nulls(body) == [], url
    got = dict(zip(LLM, body["metric_values"][-1]["values"], strict=True))
    assert got["baseten_llm_output_tokens_total"][0] > 0 and got["baseten_llm_input_tokens_total"][0] > 0
    assert math.isclose(got["baseten_llm_decode_tokens_per_second"][0], engine_speed, rel_tol=1e-9), url


MAPI = "baseten_model_api_"


def _check_model_api(client: httpx.Client, base: str, window: dict[str, int]) -> None:
    """demo-chat's series per team over the run: answers, tokens of each type, TTFT and decode tokens/s
    for both teams; rate limited: support's only, and its SERIES moves."""
    url = f"{base}/v1/model_apis/demo-chat/metrics"
    names = ["inference_requests_total", "rate_limited_requests_total", "tokens_total"]
    names += ["time_to_first_token_seconds", "decode_tokens_per_second"]
    resp = client.get(url, params={"mode": "SUMMARY", "metrics": [MAPI + n for n in names], **window})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    schema_validator("GetModelMetricsResponseV1").validate(body)
    got = {
        (
            d["name"].removeprefix(MAPI),
            labels["team_id"],
            labels.get("status")
            or labels.get("token_type")
            or str(labels.get("quantile") or labels.get("stat") or ""),
        ): v
        for d, row in zip(body["metric_descriptors"], body["metric_values"][-1]["values"], strict=True)
        for labels, v in zip(d["label_sets"], row, strict=True)
    }
    for team in ("research", "support"):
        assert got[("inference_requests_total", team, "2xx")] > 0, team
        for kind in ("input_cached", "input_uncached", "output"):  # repeated prompts: cached tokens
            assert got[("tokens_total", team, kind)] > 0, (team, kind)
        assert got[("time_to_first_token_seconds", team, "avg")] > 0, team
        assert 0 < got[("decode_tokens_per_second", team, "avg")] <= 100.0, team  # 10 ms a token at best
    assert got[("rate_limited_requests_total", "support", "")] > 0
    assert got.get(("rate_limited_requests_total", "research", ""), 0) == 0
    assert got[("inference_requests_total", "research", "4xx")] == 0
    params = {"mode": "SERIES", "metrics": MAPI + "rate_limited_requests_total", "team_ids[]": "support"}
    series = client.get(url, params={**params, **window}).json()
    steps = [v["values"][0][0] for v in series["metric_values"]]
    assert any(s and s > 0 for s in steps), steps  # the rate-limited graph moves


def _model_api_lines(out: str) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """team -> (the client's figures, the SUMMARY's) of the demo's final Model API lines (each "equal")."""
    pattern = re.compile(r"^model API calls counted by the client, team (\w+): (.*); SUMMARY: (.*): equal$")

    def figures(text: str) -> dict[str, float]:
        return {k: float(v) for k, v in (f.rsplit(" ", 1) for f in text.split(", "))}

    found = [pattern.match(line) for line in out.splitlines() if line.startswith("model API calls")]
    assert found and all(found), out
    return {m[1]: (figures(m[2]), figures(m[3])) for m in found if m}


def _check_promotion_events(client: httpx.Client, base: str, promo_ms: int) -> None:
    """The rolling promotion of d2 recorded its start, both steps and its end (issue 15), in order."""
    params = {"kinds": "PROMOTED,PROMOTION_CONTROL", "start_epoch_millis": promo_ms}
    events = client.get(f"{base}/v1/models/demo-model/events", params=params).json()["events"]
    got = [
        (e["kind"], e["details"].get("action"), e["details"]["percent"], e["details"]["status"])
        for e in events
    ]
    assert got == [
        ("PROMOTED", None, 25, "RAMPING_UP"),
        ("PROMOTION_CONTROL", "STEP", 50, "RAMPING_UP"),
        ("PROMOTION_CONTROL", "STEP", 100, "SUCCEEDED"),
        ("PROMOTED", None, 100, "SUCCEEDED"),
    ]
    assert {e["deployment_id"] for e in events} == {"d2"}
    times = [e["epoch_millis"] for e in events]
    assert times[0] == promo_ms and times[0] < times[1] < times[2] == times[3]


def test_demo_feeds_every_metric_promotes_and_exits_cleanly(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = f"{base}/v1/models/demo-model/environments/production"
    args = ["--duration", str(DURATION_S), "--port", str(port), "--api-key", KEY, "--data-dir", str(tmp_path)]
    proc = start(["-m", "servemetrics", "demo", *args], tmp_path / "demo.out")
    seen: set[int] = set()
    client = httpx.Client(headers={"Authorization": f"Api-Key {KEY}"}, timeout=30)
    try:
        started_ms = int(time.time() * 1000)
        promoted = None
        deadline = time.monotonic() + DURATION_S / 2 + 240  # start-up (100 s seen under load), half the run
        while promoted is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "demo.out").read_text()
            seen |= _children(proc.pid)
            time.sleep(1)
            try:
                resp = client.get(f"{base}/v1/models/demo-model/events", params={"kinds": "PROMOTED"})
            except httpx.HTTPError:
                continue
            if resp.status_code == 200:
                events = [e for e in resp.json()["events"] if e["deployment_id"] == "d2"]
                promoted = events[0] if events else None
        assert promoted is not None, (tmp_path / "demo.out").read_text()
        assert promoted["details"]["percent"] == 25 and promoted["details"]["rolling"] is True
        promo_ms = promoted["epoch_millis"]

        # 50 % after 20 s, 100 % after 40 s, then two scrapes so the store holds what came before
        wait_until(lambda: client.get(env).json()["in_progress_promotion"] is None, "100 %", 180)
        wait_for_scrapes(base, 2)
        seen |= _children(proc.pid)
        assert proc.poll() is None
        now = int(time.time() * 1000)
        # every scrape started before the window's end is stored before the checks read it: two
        # scrapes per target after it (a scrape written between two reads of one window made the
        # engine's and the LLM layer's decode tokens/s of the same histogram differ: 82.214 vs 82.181)
        wait_for_scrapes(base, 2 * _targets(base))
        assert client.get(env).json()["in_progress_promotion"] is None  # reached 100 %
        assert client.get(env).json()["current_deployment"]["id"] == "d2"
        _check_promotion_events(client, base, promo_ms)
        current = client.get(f"{env}/metrics").json()
        assert [d["name"] for d in current["metric_descriptors"]] == list(DEFAULT_METRICS)
        assert _nulls(current) == []
        metrics = REQUIRED + (ASYNC if has_async_route(base) else [])
        window = {"start_epoch_millis": started_ms, "end_epoch_millis": now}
        summary = client.get(
            f"{env}/metrics", params={"mode": "SUMMARY", "metrics": metrics, **window}
        ).json()
        assert {d["name"] for d in summary["metric_descriptors"]} == set(metrics)
        assert _nulls(summary) == []
        series = client.get(f"{env}/metrics", params={"mode": "SERIES", **window}).json()
        starts = [v["start_epoch_millis"] for v in series["metric_values"]]
        assert promo_ms in starts and starts[0] == started_ms
        _check_loops(client, base, window)
        _check_engines(client, base, window)
        _check_model_api(client, base, window)

        assert proc.wait(timeout=DURATION_S) == 0
    finally:
        client.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = (tmp_path / "demo.out").read_text()
    assert KEY in out and f"{base}/docs" in out and "stopped every process" in out
    for title in ("CURRENT", "SUMMARY", "SERIES", "ENGINE d1 (vllm format)", "ENGINE d2 (sglang format)"):
        assert out.count(title) >= 2, out  # at start-up and at the end
    # issue 11: the requests the demo's client counted through the rolling promotion (sync by status
    # class, each delivered async request as a 2xx) equal the environment's SUMMARY, exactly
    [line] = [x for x in out.splitlines() if x.startswith("requests counted by the client:")]
    assert line.endswith(": equal"), line
    # issue 17 part 6: per team, the client's counts and usage sums equal the service's SUMMARY
    teams = _model_api_lines(out)
    assert sorted(teams) == ["research", "support"]
    for team, (mine, served) in teams.items():
        assert mine == served, team
        assert mine["2xx"] > 0 and mine["output"] > 0 and mine["input_uncached"] > 0, team
        assert mine["5xx"] == 0, team
    support, research = teams["support"][0], teams["research"][0]
    assert support["rate limited"] > 0 and support["4xx"] == support["rate limited"]  # every 429 counted
    assert research["rate limited"] == 0 and research["4xx"] == 0
    assert len(seen) >= 7  # four replicas, the DCGM replay, the trainer, the service
    assert [pid for pid in seen if _alive(pid)] == []
