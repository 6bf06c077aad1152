"""Issue 12 part 8: failed authentication is limited per client address.

With the defaults (``auth_rate_limit: {failures: 30, window: 60s}``) a client's first 30 wrong keys are
401s; from then on every request of that address that needs a key (a correct one too) is a 429 with
``Retry-After`` and ``{"error": …, "retry_after": <seconds>}`` until the oldest failure is 60 s old.
Other addresses are not affected; requests without a key are not counted. The service clock is pinned
and moved by hand, so nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from servemetrics.config import ConfigError, parse_config
from tests.apptools import auth, build_app, org
from tests.query.helpers import T0

VALID, WRONG = "k-acme-manage", "k-not-stored"
LIMITED = "Rate limit exceeded. Please try again later."


class Clock:
    """An epoch-ms clock the test moves (``advance``)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


def declarations(**limit: object) -> dict:
    models = [{"id": "m1", "organization": "acme", "deployments": [{"id": "d1"}]}]
    found = {"organizations": [org("acme", {VALID: "WORKSPACE_MANAGE_ALL"})], "models": models}
    return {**found, "auth_rate_limit": limit} if limit else found


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(tmp_path, clock: Clock) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path, declarations(), clock=clock)) as c:
        yield c


def models(client: TestClient, key: str | None) -> tuple[int, dict, str | None]:
    resp = client.get("/v1/models", headers=auth(key) if key else {})
    return resp.status_code, resp.json(), resp.headers.get("retry-after")


def test_the_31st_wrong_key_in_a_minute_is_a_429_for_every_key_of_that_address(client, clock):
    for _ in range(30):
        assert models(client, WRONG)[0] == 401
    assert models(client, WRONG) == (429, {"error": LIMITED, "retry_after": 60}, "60")
    assert models(client, VALID) == (429, {"error": LIMITED, "retry_after": 60}, "60")  # not an oracle
    clock.advance(45)
    assert models(client, VALID) == (429, {"error": LIMITED, "retry_after": 15}, "15")
    # another address: untouched
    elsewhere = TestClient(client.app, client=("192.0.2.7", 40000))
    assert models(elsewhere, VALID)[0] == 200
    assert models(elsewhere, WRONG)[0] == 401
    # 60 s after the failures: allowed again, and the count starts over
    clock.advance(15)
    assert models(client, VALID)[0] == 200
    for _ in range(30):
        assert models(client, WRONG)[0] == 401
    assert models(client, WRONG)[0] == 429


def test_a_success_does_not_reset_the_count(client):
    for _ in range(30):
        assert models(client, VALID)[0] == 200
        assert models(client, WRONG)[0] == 401
    assert models(client, WRONG) == (429, {"error": LIMITED, "retry_after": 60}, "60")


def test_requests_without_a_key_are_not_counted(client):
    for _ in range(100):
        assert models(client, None)[0] == 401
    assert models(client, VALID)[0] == 200


def test_wrong_keys_at_the_gateway_count_the_same(client):
    for _ in range(30):
        resp = client.post("/v1/models/m1/environments/production/predict", json={}, headers=auth(WRONG))
        assert resp.status_code == 401
    resp = client.post("/v1/models/m1/environments/production/predict", json={}, headers=auth(VALID))
    assert (resp.status_code, resp.json(), resp.headers["retry-after"]) == (
        429,
        {"error": LIMITED, "retry_after": 60},
        "60",
    )
    assert models(client, VALID)[0] == 429


def test_the_limit_is_configurable_and_can_be_turned_off(tmp_path, clock):
    app = build_app(tmp_path, declarations(failures=3, window="10s"), clock=clock)
    with TestClient(app) as c:
        assert [models(c, WRONG)[0] for _ in range(4)] == [401, 401, 401, 429]
        assert models(c, VALID) == (429, {"error": LIMITED, "retry_after": 10}, "10")
    app = build_app(tmp_path / "off", declarations(failures=0), clock=clock)
    with TestClient(app) as c:
        assert {models(c, WRONG)[0] for _ in range(100)} == {401}
        assert models(c, VALID)[0] == 200


@pytest.mark.parametrize(
    ("limit", "says"),
    [
        ({"failures": -1}, "auth_rate_limit.failures"),
        ({"window": "500ms"}, "auth_rate_limit.window"),
        ({"window": "2d"}, "auth_rate_limit.window"),
        ({"failure": 3}, "failure"),
    ],
)
def test_a_bad_limit_is_a_config_error(tmp_path, limit, says):
    with pytest.raises(ConfigError, match=says):
        parse_config({"data_dir": str(tmp_path), "auth_rate_limit": limit})
