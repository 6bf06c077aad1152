"""C14 end to end: requests answered 2xx through ``…/environments/production/predict`` during a rolling
promotion, counted at the client, equal the environment's SUMMARY of ``baseten_inference_requests_total``
2xx over the same window, exactly (`servemetrics serve` in front of two examples/replica.py processes).

The promotion relabels the gateway's counter children (d1 ``stable`` -> ``promoting`` beside the new d2
``promoting``, then d2 ``stable``): each new child must count from 0, none may lose its first requests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import free_port, start, stop, wait_for_scrapes, wait_http, wait_until

pytestmark = pytest.mark.e2e
MANAGE, INVOKE = "promo-manage", "promo-invoke"
REQ = "baseten_inference_requests_total"
PREDICT = "/v1/models/m1/environments/production/predict"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("promotion")
    ports = [free_port() for _ in range(2)]
    procs = [
        start(
            ["examples/replica.py", "--port", str(p), "--name", f"p{i}", "--token-ms", "1"], tmp / f"r{i}.log"
        )
        for i, p in enumerate(ports)
    ]
    sport = free_port()
    deployments = [
        {"id": f"d{i + 1}", "replicas": [{"id": "r1", "targets": [f"http://127.0.0.1:{p}/metrics"]}]}
        for i, p in enumerate(ports)
    ]
    cfg = {
        "listen": f"127.0.0.1:{sport}",
        "data_dir": str(tmp / "data"),
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "organizations": [
            {
                "name": "acme",
                "api_keys": [
                    {"key": MANAGE, "type": "WORKSPACE_MANAGE_ALL"},
                    {"key": INVOKE, "type": "WORKSPACE_INVOKE", "model_ids": ["m1"]},
                ],
            }
        ],
        "models": [
            {
                "id": "m1",
                "name": "promo",
                "organization": "acme",
                "deployments": deployments,
                "environments": [
                    {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
                ],
            }
        ],
    }
    (tmp / "servemetrics.yaml").write_text(yaml.safe_dump(cfg))
    service = start(
        ["-m", "servemetrics", "serve", "--config", str(tmp / "servemetrics.yaml")], tmp / "serve.log"
    )
    url = f"http://127.0.0.1:{sport}"
    try:
        for p in ports:
            wait_http(f"http://127.0.0.1:{p}/health")
        wait_http(f"{url}/healthz")
        wait_until(lambda: _active(url) == {"d1": 1.0, "d2": 1.0}, "both replicas healthy")
        yield url
    finally:
        stop(service)
        for proc in procs:
            stop(proc)


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Api-Key {key}"}


def _samples(url: str, name: str) -> list:
    text = httpx.get(url, headers=_auth(MANAGE), timeout=10).text
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def _active(base: str) -> dict[str, float]:
    return {
        s.labels["deployment_id"]: s.value
        for s in _samples(f"{base}/gateway/metrics", "baseten_replicas_active")
    }


def _gateway_2xx(base: str) -> float:
    """Requests answered 2xx as the gateway's own counters hold them now (every child summed)."""
    return sum(
        s.value for s in _samples(f"{base}/gateway/metrics", REQ) if s.labels["status_code"].startswith("2")
    )


def _caught_up(base: str, answered: float) -> None:
    """Wait until the gateway's counters show ``answered`` 2xx requests, then until two more scrapes of
    ``/gateway/metrics`` completed: the second of them started after those counters were final."""
    wait_until(lambda: _gateway_2xx(base) == answered, f"the gateway counting {answered} requests")
    wait_for_scrapes(base, 2, source="gateway")


def _requests(base: str, n: int) -> int:
    """Send ``n`` requests through production; how many were answered 2xx (counted at the client)."""

    def one(_: int) -> bool:
        r = httpx.post(
            f"{base}{PREDICT}", headers=_auth(INVOKE), params={"tokens": 1}, content=b"{}", timeout=30
        )
        return 200 <= r.status_code < 300

    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(one, range(n)))


def _control(base: str, action: str, body: dict[str, object] | None = None) -> None:
    url = f"{base}/v1/models/m1/environments/production/{action}"
    r = httpx.post(url, headers=_auth(MANAGE), json=body, timeout=30)
    assert r.status_code < 300, r.text


def _summary_2xx(base: str, start_ms: int, end_ms: int) -> float:
    body = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=_auth(MANAGE),
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": start_ms,
            "end_epoch_millis": end_ms,
            "metrics": REQ,
        },
        timeout=30,
    ).json()
    assert [d["name"] for d in body["metric_descriptors"]] == [REQ], body
    return float(body["metric_values"][0]["values"][0][0])


def test_c14_requests_during_a_rolling_promotion_are_all_counted(base: str) -> None:
    answered = _requests(base, 10)  # d1's production/stable child exists and is scraped before the window
    _caught_up(base, answered)
    start_ms = int(time.time() * 1000)
    # a scrape that started after the window start, before the first counted request: the pair that
    # straddles the start holds no request, so spreading deltas over their pairs (rule 5) moves none of
    # the counted requests out of the window
    wait_for_scrapes(base, 2, source="gateway")
    counted = _requests(base, 10)
    _control(base, "promote", {"deployment_id": "d2", "percent": 50})
    counted += _requests(base, 40)  # new children: d1 promoting (old phase still exposed), d2 promoting
    _control(base, "force_roll_forward_promotion")
    counted += _requests(base, 20)  # and d2 stable
    _caught_up(base, answered + counted)
    end_ms = int(time.time() * 1000)
    assert counted == 70
    assert _summary_2xx(base, start_ms, end_ms) == counted
