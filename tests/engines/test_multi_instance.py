"""Two ``servemetrics serve`` processes in front of one PostgreSQL registry and one VictoriaMetrics.

The instances share the configuration (organization, model, deployments, ``registry_url``, ``store``);
only ``listen`` and ``data_dir`` (where each keeps its own remote_write buffer, docs/store.md "Several
instances") differ. Samples are written through instance A (``POST /v1/import``), the promotion is made
through instance B, and every metrics answer (environment and deployment scope, also ``production`` as a
deployment; SERIES, SUMMARY, CURRENT) must be the same from both, with the promotion split in it. Then
a promotion of the gateway's model through B must reach A's routing within its cache TTL.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest_pg import fresh_pg_url
from tests.engines.engines import Engine
from tests.processes import free_port, start, stop, wait_http

pytestmark = pytest.mark.postgres

M = f"multi-{uuid.uuid4().hex[:8]}"  # model ids of this run (the engine is shared by the session)
G = f"gw-{uuid.uuid4().hex[:8]}"
KEY = "multi-instance-key-0123456789"
AUTH = {"Authorization": f"Api-Key {KEY}"}
STEP_S = 15
BEFORE = 40  # samples before the promotion instant (10 minutes)
AFTER = 8  # samples after it (2 minutes, ahead of the clock: the import allows 10)
REPLICAS = {"d1": 3, "d2": 5}  # baseten_replicas_active per deployment
RATE = {"d1": 10, "d2": 20}  # 2xx requests per 15 s per deployment; 5xx: 1 per 15 s on both
BOUNDS = ("0.1", "0.5", "+Inf")
OBS = {"d1": (4, 5, 5), "d2": (1, 4, 5)}  # cumulative latency observations per 15 s, per bound


def _openmetrics(deployment: str, t0_s: int, n: int) -> str:
    """``n`` samples 15 s apart from ``t0_s`` of the replicas gauge, the request counter (2xx, 5xx) and
    the latency histogram of one replica of ``deployment``."""
    ts = [t0_s + i * STEP_S for i in range(n)]
    h = "baseten_end_to_end_response_time_seconds"
    lines = ["# TYPE baseten_replicas_active gauge"]
    lines += [f"baseten_replicas_active {REPLICAS[deployment]} {t}" for t in ts]
    lines.append("# TYPE baseten_inference_requests counter")
    for code, rate in (("200", RATE[deployment]), ("500", 1)):
        lines += [
            f'baseten_inference_requests_total{{status_code="{code}"}} {rate * i} {t}'
            for i, t in enumerate(ts)
        ]
    lines.append(f"# TYPE {h} histogram")
    for i, t in enumerate(ts):  # one point of a histogram: every bucket, _sum and _count together
        lines += [f'{h}_bucket{{le="{b}"}} {c * i} {t}' for b, c in zip(BOUNDS, OBS[deployment], strict=True)]
        lines += [
            f"{h}_sum {0.2 * OBS[deployment][-1] * i:.1f} {t}",
            f"{h}_count {OBS[deployment][-1] * i} {t}",
        ]
    return "\n".join([*lines, "# EOF", ""])


def _config(tmp: Path, name: str, registry_url: str, engine: Engine, replica_urls: list[str]) -> Path:
    """The shared configuration with this instance's ``listen`` and ``data_dir``; its path. Model ``M``
    (d1, d2 without targets) holds imported samples; model ``G`` (g1, g2: one examples/replica.py each)
    is served through the gateway."""
    start_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7200))
    production = [{"name": "production", "promotions": [{"deployment": "d1", "at": start_at}]}]
    cfg = {
        "listen": f"127.0.0.1:{free_port()}",
        "data_dir": str(tmp / name),
        "registry_url": registry_url.replace("postgresql+psycopg://", "postgresql://"),  # issue 6 form
        "store": {
            "kind": "prometheus",
            "flavor": "victoriametrics",
            "query_url": engine.url,
            "remote_write_url": engine.url + "/api/v1/write",
        },
        "organizations": [{"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}],
        "models": [
            {
                "id": M,
                "name": "multi",
                "organization": "acme",
                "deployments": [{"id": d, "replicas": [{"id": f"{d}-r1", "targets": []}]} for d in REPLICAS],
                "environments": production,
            },
            {
                "id": G,
                "name": "gateway",
                "organization": "acme",
                "deployments": [
                    {"id": f"g{i + 1}", "replicas": [{"id": "r1", "targets": [url]}]}
                    for i, url in enumerate(replica_urls)
                ],
                "environments": [
                    {"name": "production", "promotions": [{"deployment": "g1", "at": start_at}]}
                ],
            },
        ],
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def two_instances(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, victoriametrics_engine: Engine
) -> Iterator[tuple[str, str]]:
    """(URL of A, URL of B) on a fresh registry database, with two replicas for model ``G``; all
    stopped afterwards."""
    tmp = tmp_path_factory.mktemp("multi")
    registry_url = fresh_pg_url(pg_url)
    procs = []
    try:
        ports = [free_port() for _ in range(2)]
        for i, port in enumerate(ports):
            procs.append(
                start(
                    ["examples/replica.py", "--port", str(port), "--name", f"p{i + 1}"], tmp / f"p{i + 1}.log"
                )
            )
        replica_urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
        urls = []
        for name in ("a", "b"):  # one after the other: both apply the same config to the registry
            cfg = _config(tmp, name, registry_url, victoriametrics_engine, replica_urls)
            procs.append(start(["-m", "servemetrics", "serve", "--config", str(cfg)], tmp / f"{name}.log"))
            urls.append("http://" + yaml.safe_load(cfg.read_text())["listen"])
            wait_http(urls[-1] + "/healthz", deadline_s=60)
        yield urls[0], urls[1]
    finally:
        for proc in reversed(procs):
            stop(proc)


def _get(client: httpx.Client, url: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = client.get(url, params=params, headers=AUTH)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _same_from_both(
    client: httpx.Client, a: str, b: str, path: str, params: dict[str, Any]
) -> dict[str, Any]:
    """The answer of ``path`` from A, asserted equal to B's. CURRENT's window moves with the clock, so its
    answers are compared without the window's instants, from B between two equal answers of A."""
    for _ in range(5):
        first, other, second = (_get(client, base + path, params) for base in (a, b, a))
        if params.get("mode") == "CURRENT":
            for body in (first, other, second):
                _drop_window(body)
        if first == second:
            assert other == first, f"{path} {params}: the instances disagree"
            return first
    raise AssertionError(f"{path} {params}: A's answer kept changing")


def _drop_window(body: dict[str, Any]) -> None:
    """Remove the window's instants (CURRENT's ``[now - 5 min, now]``) from an answer."""
    for part in (body, *body["metric_values"]):
        part.pop("start_epoch_millis", None)
        part.pop("end_epoch_millis", None)


def _values(body: dict[str, Any], metric: str) -> list[list[float | None]]:
    """The cells of ``metric`` (one list per label set) in each value set of the answer."""
    i = [d["name"] for d in body["metric_descriptors"]].index(metric)
    return [value_set["values"][i] for value_set in body["metric_values"]]


def test_two_instances_give_the_same_answers(two_instances, victoriametrics_engine: Engine) -> None:
    a, b = two_instances
    model_id = M
    t0_s = int(time.time()) // 30 * 30 - BEFORE * STEP_S  # steps are 30 s: the window starts on one
    ts = [t0_s + i * STEP_S for i in range(BEFORE + AFTER)]
    with httpx.Client(timeout=30) as client:
        for d in REPLICAS:  # every sample through A
            answer = client.post(
                f"{a}/v1/import",
                params={"model_id": model_id, "deployment_id": d, "replica": f"{d}-r1"},
                content=_openmetrics(d, t0_s, BEFORE + AFTER),
                headers=AUTH,
            )
            assert answer.status_code == 200, answer.text
        end_ms = (ts[-1] + STEP_S) * 1000
        per_deployment = len(ts) * (1 + 2 + len(BOUNDS) + 2)
        victoriametrics_engine.wait_for(model_id, 2 * per_deployment, t0_s * 1000, end_ms)

        while not 5 <= (time.time() - t0_s) % STEP_S < 10:  # promote half way between two samples
            time.sleep(0.2)
        promoted_at = time.time()
        promoted = client.post(
            f"{b}/v1/models/{model_id}/environments/production/promote",
            json={"deployment_id": "d2"},
            headers=AUTH,
        )  # through B
        assert promoted.status_code == 200, promoted.text
        for base in (a, b):
            env = _get(client, f"{base}/v1/models/{model_id}/environments/production", {})
            assert env["current_deployment"]["id"] == "d2"

        window = {"start_epoch_millis": t0_s * 1000, "end_epoch_millis": end_ms}
        answers = {}
        for scope in (
            "environments/production",
            "deployments/d1",
            "deployments/d2",
            "deployments/production",  # the environment's current deployment, resolved per request
        ):
            path = f"/v1/models/{model_id}/{scope}/metrics"
            for mode, extra in (("SERIES", window), ("SUMMARY", window), ("CURRENT", {})):
                answers[scope, mode] = _same_from_both(client, a, b, path, {"mode": mode, **extra})

    # hand-computed: d1 serves before the promotion, d2 after it; a delta belongs to its later sample
    k = sum(1 for t in ts[1:] if t < promoted_at)  # d1's deltas
    assert 0 < k < len(ts) - 4, "the promotion must fall inside the data, with whole steps after it"
    series = answers["environments/production", "SERIES"]
    replicas = _values(series, "baseten_replicas_active")
    requests = _values(
        series, "baseten_inference_requests_total"
    )  # {2xx}, {4xx} (0: no 4xx series), {5xx} per 30 s step
    assert replicas[0] == [REPLICAS["d1"]] and replicas[-1] == [REPLICAS["d2"]]
    # SERIES splits at the promotion: d1's deltas before it, d2's after it, 5xx one per 15 s throughout
    # (the piece from the promotion to the next grid point holds no sample: null)
    assert [sum(step[i] or 0 for step in requests) for i in (0, 2)] == [
        RATE["d1"] * k + RATE["d2"] * (len(ts) - 1 - k),
        len(ts) - 1,
    ]
    # the last step [690 s, 720 s) holds one pair, (690, 705]: the data ends at 705 s (nothing extrapolated)
    assert requests[1] == [2 * RATE["d1"], 0, 2] and requests[-1] == [RATE["d2"], 0, 1]
    summary = _values(answers["environments/production", "SUMMARY"], "baseten_inference_requests_total")
    deltas = len(ts) - 1
    # SUMMARY: one value set with every deployment that served in the window (docs/query-semantics.md)
    assert summary == [[(RATE["d1"] + RATE["d2"]) * deltas, 0, 2 * deltas]]
    d1_summary = _values(answers["deployments/d1", "SUMMARY"], "baseten_inference_requests_total")
    assert d1_summary == [[RATE["d1"] * deltas, 0, deltas]]  # a deployment's own scope: no split
    current = {
        d: _values(answers[f"deployments/{d}", "CURRENT"], "baseten_replicas_active") for d in REPLICAS
    }
    assert current == {"d1": [[REPLICAS["d1"]]], "d2": [[REPLICAS["d2"]]]}
    assert _values(answers["environments/production", "CURRENT"], "baseten_replicas_active") == [
        [REPLICAS["d2"]]
    ]
    assert answers["deployments/production", "SERIES"] == answers["deployments/d2", "SERIES"]  # promoted


def _served_by(client: httpx.Client, base: str) -> str:
    """The replica (``X-Replica``) that answered a request through ``base``'s gateway."""
    answer = client.post(
        f"{base}/v1/models/{G}/environments/production/predict", params={"tokens": 1}, headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["X-Replica"]


def test_a_promotion_through_one_instance_reaches_the_other_gateway(two_instances) -> None:
    a, b = two_instances
    with httpx.Client(timeout=30) as client:
        stop_at = time.monotonic() + 30  # the replicas answer once the services have health-checked them
        while True:
            try:
                if _served_by(client, a) == _served_by(client, b) == "p1":
                    break
            except AssertionError:
                if time.monotonic() > stop_at:
                    raise
            time.sleep(0.2)
        promoted = client.post(
            f"{b}/v1/models/{G}/environments/production/promote", json={"deployment_id": "g2"}, headers=AUTH
        )
        assert promoted.status_code == 200, promoted.text
        assert _served_by(client, b) == "p2"  # B dropped its own cache with the management write
        # A learns it when its cached registry answers expire (state_ttl_s, 1 s; docs/gateway.md)
        started = time.monotonic()
        while _served_by(client, a) != "p2":
            assert time.monotonic() - started < 5, "A's gateway still routes to g1 5 s after the promotion"
            time.sleep(0.05)
