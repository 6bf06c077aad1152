"""Issue 12 item 8: the management API's rate limits per API key and endpoint (platform-facts §4).

Defaults (``api_rate_limit: {per_second: 100, activate_per_minute: 20, retry_per_minute: 10}``): a
key's 101st request to one endpoint within a second, or its 21st activation within a minute, is a 429
``{"error": "Rate limit exceeded. Please try again later.", "retry_after": <s>}`` with ``Retry-After``,
``<s>`` being the whole seconds (rounded up) until the oldest counted request is one window old. The
service clock is pinned and moved by hand, so every wait below is computed from it and nothing sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from servemetrics.api.api_limit import ApiRateLimiter, Rule, endpoint_name
from servemetrics.api.app import ROUTERS
from servemetrics.api.deps import authenticate
from servemetrics.api.errors import ApiError
from servemetrics.api.routes import gateway, queued
from servemetrics.config import ConfigError, parse_config
from tests.apptools import auth, build_app, org
from tests.query.helpers import T0

KEY, OTHER_KEY = "k-acme-manage", "k-acme-second"
LIMITED = "Rate limit exceeded. Please try again later."
DEPLOYMENTS = "/v1/models/m1/deployments"


class Clock:
    """An epoch-ms clock the test moves (``advance`` in ms)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def declarations(**limit: object) -> dict:
    """acme with two managing keys; m1 with d1 serving ``production`` and d2 serving ``development``."""
    envs = [
        {"name": "production", "promotions": [{"deployment": "d1", "at": "2025-12-31T00:00:00Z"}]},
        {"name": "development", "promotions": [{"deployment": "d2", "at": "2025-12-31T00:00:00Z"}]},
    ]
    deployments = [{"id": "d1"}, {"id": "d2"}]
    model = {"id": "m1", "organization": "acme", "deployments": deployments, "environments": envs}
    keys = {KEY: "WORKSPACE_MANAGE_ALL", OTHER_KEY: "WORKSPACE_MANAGE_ALL"}
    found = {"organizations": [org("acme", keys)], "models": [model]}
    return {**found, "api_rate_limit": limit} if limit else found


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def start(tmp_path, clock: Clock) -> Iterator:
    """``start(**api_rate_limit)``: the whole app over ``declarations(**limit)``, started."""
    clients: list[TestClient] = []

    def run(**limit: object) -> TestClient:
        client = TestClient(build_app(tmp_path / str(len(clients)), declarations(**limit), clock=clock))
        clients.append(client.__enter__())
        return client

    yield run
    for client in clients:
        client.__exit__(None, None, None)


def call(client: TestClient, method: str, path: str, key: str = KEY) -> tuple[int, dict, str | None]:
    resp = client.request(method, path, headers=auth(key))
    return resp.status_code, resp.json(), resp.headers.get("retry-after")


def refused(seconds: int) -> tuple[int, dict, str]:
    return 429, {"error": LIMITED, "retry_after": seconds}, str(seconds)


def test_the_101st_request_in_one_second_is_a_429_until_the_oldest_is_a_second_old(start, clock):
    client = start()
    first = call(client, "GET", "/v1/models")
    assert first[0] == 200 and [m["id"] for m in first[1]["models"]] == ["m1"]
    assert [call(client, "GET", "/v1/models") for _ in range(99)] == [first] * 99  # answers as before
    assert call(client, "GET", "/v1/models") == refused(1)  # all 100 at T0: free at T0 + 1000 ms
    clock.advance(999)
    assert call(client, "GET", "/v1/models") == refused(1)  # 1 ms left, rounded up; not counted
    clock.advance(1)
    assert call(client, "GET", "/v1/models") == first


def test_the_window_slides_with_each_request(start, clock):
    client = start(per_second=3)
    for step in (0, 400, 400):  # T0, T0 + 400, T0 + 800
        clock.advance(step)
        assert call(client, "GET", "/v1/models")[0] == 200
    clock.advance(100)  # T0 + 900: 3 in (T0 - 100, T0 + 900]
    assert call(client, "GET", "/v1/models") == refused(1)
    clock.advance(100)  # T0 + 1000: the T0 request left the window
    assert call(client, "GET", "/v1/models")[0] == 200
    clock.advance(100)  # T0 + 1100: 400, 800 and 1000 are in it; 400 leaves at T0 + 1400
    assert call(client, "GET", "/v1/models") == refused(1)


def test_keys_and_endpoints_have_their_own_budgets_and_the_limit_comes_before_the_work(start):
    client = start(per_second=2)
    assert [call(client, "GET", "/v1/models")[0] for _ in range(3)] == [200, 200, 429]
    assert call(client, "GET", "/v1/models", OTHER_KEY)[0] == 200  # another key
    assert call(client, "GET", "/v1/models/m1")[0] == 200  # another endpoint
    # one endpoint is one route template: d1 and d2 share GET …/deployments/{deployment_id}
    assert [call(client, "GET", f"{DEPLOYMENTS}/{d}")[0] for d in ("d1", "d2", "d1")] == [200, 200, 429]
    envs = "/v1/models/m1/environments"
    assert [call(client, "GET", envs)[0] for _ in range(3)] == [200, 200, 429]
    staging = client.post(envs, json={"name": "staging"}, headers=auth(KEY))
    assert staging.status_code == 201  # POST of the same path: another endpoint
    # over the limit, an unknown model is not looked up: a 429, not a 404
    assert call(client, "GET", "/v1/models/m1")[0] == 200
    assert call(client, "GET", "/v1/models/nope") == refused(1)


def test_activate_and_deactivate_allow_20_a_minute_and_aliases_share_the_budget(start, clock):
    client = start()
    assert call(client, "POST", f"{DEPLOYMENTS}/production/activate") == (200, {"success": True}, None)
    clock.advance(23_000)  # T0 + 23 s: 9 more as production, 10 as d1 (production's deployment)
    for target in ["production"] * 9 + ["d1"] * 10:
        assert call(client, "POST", f"{DEPLOYMENTS}/{target}/activate")[0] == 200
    # the 21st in the minute, as development (d2): the T0 one leaves at T0 + 60 s, 37 s from now
    assert call(client, "POST", f"{DEPLOYMENTS}/development/activate") == refused(37)
    assert call(client, "POST", f"{DEPLOYMENTS}/d2/activate") == refused(37)
    assert call(client, "POST", f"{DEPLOYMENTS}/d1/activate", OTHER_KEY)[0] == 200  # another key
    assert call(client, "POST", f"{DEPLOYMENTS}/d2/deactivate")[0] == 200  # its own endpoint
    assert call(client, "GET", f"{DEPLOYMENTS}/d1")[0] == 200  # per_second, untouched
    # an environment's activate is "all other /v1/*": 100 a second, not 20 a minute
    env = "/v1/models/m1/environments/development"
    actions = ("deactivate", "activate") * 11
    assert {call(client, "POST", f"{env}/{action}")[0] for action in actions} == {200}
    clock.advance(37_000)  # T0 + 60 s: one place free, the next one at T0 + 23 s + 60 s
    assert call(client, "POST", f"{DEPLOYMENTS}/d2/activate")[0] == 200
    assert call(client, "POST", f"{DEPLOYMENTS}/d2/activate") == refused(23)


def test_retry_allows_10_a_minute():
    """The service has no ``…/retry`` route yet: the rule is checked on its route template."""
    clock = Clock()
    limiter = ApiRateLimiter(100, 20, 10, clock)
    retry = "/v1/models/{model_id}/deployments/{deployment_id}/retry"
    assert limiter.endpoint_rule("POST", retry) == Rule(10, 60_000)
    assert limiter.endpoint_rule("GET", retry) == Rule(100, 1_000)
    for _ in range(10):
        limiter.check(7, "POST", retry)
    clock.advance(59_001)  # 999 ms left: 1 s
    with pytest.raises(ApiError) as refusal:
        limiter.check(7, "POST", retry)
    assert (refusal.value.status, refusal.value.message, refusal.value.retry_after) == (429, LIMITED, 1)
    limiter.check(8, "POST", retry)  # another key id
    clock.advance(999)
    limiter.check(7, "POST", retry)


def test_routes_that_are_not_the_management_api_are_not_counted(start):
    client = start(per_second=1)
    assert [call(client, "GET", "/v1/models")[0] for _ in range(2)] == [200, 429]
    predict = "/v1/models/m1/environments/production/predict"
    statuses = [client.post(predict, json={}, headers=auth(KEY)).status_code for _ in range(3)]
    assert statuses[0] != 429 and statuses == statuses[:1] * 3  # the gateway's own answer each time
    assert [call(client, "GET", "/v1/models/m1/async_requests/x")[0] for _ in range(3)] == [404] * 3
    assert [client.get("/healthz").status_code for _ in range(3)] == [200] * 3
    limiter = ApiRateLimiter(1, 1, 1, lambda: T0)
    assert limiter.endpoint_rule("POST", "/v1/import") is None
    assert limiter.endpoint_rule("POST", "/api/v1/write") is None
    assert limiter.endpoint_rule("GET", "/metrics") is None


def _authenticates(dependant: Dependant) -> bool:
    return any(d.call is authenticate or _authenticates(d) for d in dependant.dependencies)


def test_which_routes_are_counted():
    """Every route of the app: those that take a key through ``authenticate`` under ``/v1/`` are
    counted, activate / deactivate per minute; the inference routes never reach ``authenticate``."""
    limiter = ApiRateLimiter(100, 20, 10, lambda: T0)
    routes = [r for m in (*ROUTERS, gateway, queued) for r in m.router.routes if isinstance(r, APIRoute)]
    keyed = {
        endpoint_name(m, r.path): r.path for r in routes if _authenticates(r.dependant) for m in r.methods
    }
    rules = {name: limiter.endpoint_rule(*name.split(" ")) for name in keyed}
    per_minute = {name for name, rule in rules.items() if rule == Rule(20, 60_000)}
    deployment = "/v1/models/{model_id}/deployments/{deployment_id}"
    assert per_minute == {f"POST {deployment}/activate", f"POST {deployment}/deactivate"}
    assert {name for name, rule in rules.items() if rule is None} == {"POST /api/v1/write", "POST /v1/import"}
    assert all(path.startswith("/v1/") for name, path in keyed.items() if rules[name] is not None)
    assert "GET /v1/models" in rules and len(rules) > 30
    inference = [r for m in (gateway, queued) for r in m.router.routes if isinstance(r, APIRoute)]
    assert inference and not any(_authenticates(r.dependant) for r in inference)


def test_each_limit_can_be_turned_off(start):
    client = start(per_second=0, activate_per_minute=0)
    assert {call(client, "GET", "/v1/models")[0] for _ in range(101)} == {200}
    assert {call(client, "POST", f"{DEPLOYMENTS}/d1/activate")[0] for _ in range(21)} == {200}
    client = start(per_second=0)  # activate keeps its default
    assert [call(client, "POST", f"{DEPLOYMENTS}/d1/activate")[0] for _ in range(21)] == [200] * 20 + [429]


@pytest.mark.parametrize(
    ("limit", "says"),
    [
        ({"per_second": -1}, "`api_rate_limit.per_second`: Input should be greater than or equal to 0"),
        ({"per_second": 10_001}, "`api_rate_limit.per_second`: Input should be less than or equal to 10000"),
        ({"activate_per_minute": "many"}, "`api_rate_limit.activate_per_minute`: Input should be a valid"),
        ({"retry_per_minute": 2.5}, "`api_rate_limit.retry_per_minute`: Input should be a valid integer"),
        ({"per_minute": 20}, "unknown key `api_rate_limit.per_minute`: did you mean `retry_per_minute`?"),
    ],
)
def test_a_bad_limit_is_a_config_error(tmp_path, limit, says):
    with pytest.raises(ConfigError) as error:
        parse_config({"data_dir": str(tmp_path), "api_rate_limit": limit})
    assert says in str(error.value)


def test_the_defaults_are_the_platforms():
    limit = parse_config({}).api_rate_limit
    assert (limit.per_second, limit.activate_per_minute, limit.retry_per_minute) == (100, 20, 10)


def test_memory_is_bounded_and_idle_pairs_are_dropped():
    clock = Clock()
    limiter = ApiRateLimiter(1, 1, 1, clock, max_tracked=2)
    for key_id in (1, 2, 3):
        limiter.check(key_id, "GET", "/v1/models")
    assert limiter.tracked() == 2
    limiter.check(1, "GET", "/v1/models")  # key 1 was forgotten first: a fresh budget
    with pytest.raises(ApiError):
        limiter.check(3, "GET", "/v1/models")
    clock.advance(1_000)
    limiter.check(4, "GET", "/v1/models")  # 1 forgotten (over 2), then 3 dropped (idle for a window)
    assert limiter.tracked() == 1
    idle = ApiRateLimiter(1, 1, 1, clock)
    for key_id in range(5):
        idle.check(key_id, "GET", "/v1/models")
    clock.advance(1_000)
    idle.check(5, "GET", "/v1/models")  # each request drops up to 2 idle pairs, the oldest first
    assert idle.tracked() == 4


def test_a_clock_stepping_back_does_not_hold_a_key_longer_than_a_window():
    clock = Clock()
    limiter = ApiRateLimiter(1, 1, 1, clock)
    limiter.check(1, "GET", "/v1/models")
    clock.advance(-3_600_000)
    limiter.check(1, "GET", "/v1/models")  # the T0 entry is in the future now: dropped
    with pytest.raises(ApiError) as refusal:
        limiter.check(1, "GET", "/v1/models")
    assert refusal.value.retry_after == 1


def test_concurrent_requests_are_counted_exactly():
    limiter = ApiRateLimiter(100, 20, 10, lambda: T0)
    admitted: list[int] = []

    def hammer() -> None:
        for _ in range(50):
            try:
                limiter.check(1, "GET", "/v1/models")
                admitted.append(1)
            except ApiError:
                pass

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 100
