"""Model API calls end to end: the official `openai` client (PyPI 3.60.0) against `servemetrics serve`
in front of a real examples/openai_replica.py process.

acme has teams team-a (4 requests / minute on `chat`) and team-b (the default, 1000 / minute), a key each,
and an admin key without a team; `chat` is served by m1's production (d1, one replica). Organization
other has `theirs`. The tokens the client's `usage` reports must equal the increments of
`baseten_model_api_tokens_total`; team-a sending twice its limit gets a 429 for each call over it, and
the rate-limited counter counts exactly those, while team-b is unaffected.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.apptools import auth
from tests.conftest import schema_validator
from tests.model_api_service import PROMPT, model_api_service, openai_client
from tests.processes import (
    promoted,
    wait_until,
)

pytestmark = pytest.mark.e2e
ADMIN, TEAM_A, TEAM_B, OTHER = "mapi-admin", "mapi-team-a", "mapi-team-b", "mapi-other"


@dataclass(frozen=True)
class Svc:
    base: str
    clients: dict[str, openai.OpenAI] = field(default_factory=dict)

    def client(self, key: str) -> openai.OpenAI:
        """The OpenAI client of ``key`` (no retries: every 429 reaches the test), closed at the end."""
        if key not in self.clients:
            self.clients[key] = openai_client(self.base, key)
        return self.clients[key]

    def series(self, name: str, **match: str) -> float:
        """The sum of the gateway's samples ``name`` whose labels include ``match``."""
        text = httpx.get(f"{self.base}/gateway/metrics", headers=auth(ADMIN), timeout=10).text
        total = 0.0
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in match.items()):
                    total += s.value
        return total

    def tokens(self, team: str) -> dict[str, float]:
        return {
            t: self.series("baseten_model_api_tokens_total", team_id=team, token_type=t)
            for t in ("input_cached", "input_uncached", "output")
        }


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Svc]:
    tmp = tmp_path_factory.mktemp("mapi")
    organizations = [
        {
            "name": "acme",
            "teams": [{"id": "team-a"}, {"id": "team-b"}],
            "api_keys": [
                {"key": ADMIN, "type": "WORKSPACE_MANAGE_ALL"},
                {"key": TEAM_A, "type": "WORKSPACE_INVOKE", "team": "team-a"},
                {"key": TEAM_B, "type": "WORKSPACE_INVOKE", "team": "team-b"},
            ],
        },
        {"name": "other", "api_keys": [{"key": OTHER, "type": "WORKSPACE_MANAGE_ALL"}]},
    ]
    m9 = {
        "id": "m9",
        "organization": "other",
        "deployments": [{"id": "x1"}],
        "environments": [promoted("production", "x1")],
    }
    model_apis = [
        {
            "name": "chat",
            "organization": "acme",
            "model": "m1",
            "limits": {"requests_per_minute": 1000},
            "team_limits": {"team-a": {"requests_per_minute": 4}},
        },
        {"name": "theirs", "organization": "other", "model": "m9"},
    ]
    with model_api_service(tmp, organizations, model_apis, ADMIN, more_models=[m9]) as base:
        svc = Svc(base)
        yield svc
        for c in svc.clients.values():
            c.close()


def test_non_streamed_usage_equals_the_token_series(svc: Svc) -> None:
    before = svc.tokens("team-b")
    answer = svc.client(TEAM_B).chat.completions.create(
        model="chat", messages=PROMPT, max_tokens=3, extra_body={"script": {"cached": 2}}
    )
    assert answer.choices[0].message.content == "t0 t1 t2"
    u = answer.usage
    assert u is not None and (u.prompt_tokens, u.completion_tokens) == (5, 3)
    assert u.prompt_tokens_details is not None and u.prompt_tokens_details.cached_tokens == 2
    after = svc.tokens("team-b")
    assert {k: after[k] - before[k] for k in after} == {"input_cached": 2, "input_uncached": 3, "output": 3}


def test_a_stream_with_include_usage_counts_its_usage_and_one_tpot_observation_per_later_chunk(
    svc: Svc,
) -> None:
    before = svc.tokens("team-b")
    tpot_before = svc.series("baseten_model_api_time_per_output_token_seconds_count", team_id="team-b")
    ttft_before = svc.series("baseten_model_api_time_to_first_token_seconds_count", team_id="team-b")
    stream = svc.client(TEAM_B).chat.completions.create(
        model="chat",
        messages=PROMPT,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"script": {"chunks": [1, 3, 2], "gap_ms": 30}},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "t0 t1 t2 t3 t4 t5 "
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (5, 6)
    after = svc.tokens("team-b")
    assert {k: after[k] - before[k] for k in after} == {"input_cached": 0, "input_uncached": 5, "output": 6}
    # no running usage or logprobs: each content chunk is one token; three chunks, two observations
    assert (
        svc.series("baseten_model_api_time_per_output_token_seconds_count", team_id="team-b")
        == tpot_before + 2
    )
    assert (
        svc.series("baseten_model_api_time_to_first_token_seconds_count", team_id="team-b") == ttft_before + 1
    )


def test_a_stream_with_running_usage_divides_each_gap_by_its_new_tokens(svc: Svc) -> None:
    name = "baseten_model_api_time_per_output_token_seconds"
    count, total = svc.series(name + "_count", team_id="team-b"), svc.series(name + "_sum", team_id="team-b")
    stream = svc.client(TEAM_B).chat.completions.create(
        model="chat",
        messages=PROMPT,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},  # type: ignore[typeddict-unknown-key]
        extra_body={"script": {"chunks": [1, 4, 2], "gap_ms": 80}},
    )
    assert len([c for c in stream if c.choices]) == 3
    assert svc.series(name + "_count", team_id="team-b") == count + 2
    # 80 ms / 4 + 80 ms / 2 = 60 ms, give or take the scheduling of two sleeps
    assert 0.05 <= svc.series(name + "_sum", team_id="team-b") - total <= 0.2


def test_a_stream_without_usage_counts_its_chunks_as_output_tokens(svc: Svc) -> None:
    before = svc.tokens("team-b")
    stream = svc.client(TEAM_B).completions.create(
        model="chat", prompt="one two", stream=True, extra_body={"script": {"chunks": [1, 1, 1, 1]}}
    )
    assert "".join(c.choices[0].text for c in stream if c.choices) == "t0 t1 t2 t3 "
    after = svc.tokens("team-b")
    assert {k: after[k] - before[k] for k in after} == {"input_cached": 0, "input_uncached": 0, "output": 4}


def test_twice_the_limit_gets_429s_for_the_excess_counted_as_rate_limited(svc: Svc) -> None:
    limited = svc.series("baseten_model_api_rate_limited_requests_total", team_id="team-a")
    b_limited = svc.series("baseten_model_api_rate_limited_requests_total", team_id="team-b")
    seen_429, ok = 0, 0
    for _ in range(8):
        try:
            svc.client(TEAM_A).chat.completions.create(model="chat", messages=PROMPT, max_tokens=1)
            ok += 1
        except openai.RateLimitError as err:
            seen_429 += 1
            assert err.response.json()["retry_after"] >= 1
            assert err.response.headers["retry-after"] == str(err.response.json()["retry_after"])
    assert (ok, seen_429) == (4, 4)
    assert svc.series("baseten_model_api_rate_limited_requests_total", team_id="team-a") == limited + 4
    assert svc.series("baseten_model_api_inference_requests_total", team_id="team-a", status_code="429") == 4
    for _ in range(8):  # team-b is not affected
        svc.client(TEAM_B).chat.completions.create(model="chat", messages=PROMPT, max_tokens=1)
    assert svc.series("baseten_model_api_rate_limited_requests_total", team_id="team-b") == b_limited


def _refused(svc: Svc) -> dict[tuple[str, str], float]:
    """``servemetrics_gateway_refused_requests_total`` of the service's own metrics: {(route, status)}."""
    text = httpx.get(f"{svc.base}/service/metrics", timeout=10).text
    return {
        (s.labels["route"], s.labels["status_code"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "servemetrics_gateway_refused_requests_total"
    }


def _declared_too_large(base: str, path: str) -> bytes:
    """The status line of a POST to ``path`` declaring a 1 GB body (none sent): the body guard's 413."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n".encode())
        return conn.recv(4096).split(b"\r\n", 1)[0]


def test_calls_refused_before_a_model_api_are_counted_without_a_tenant_label(svc: Svc) -> None:
    """Issue 17's review: the OpenAI routes' 400 / 401 / 404 / 413 were counted nowhere. They are not a
    Model API's calls (the caller names it), so they go to the service's own counter by route and status."""
    before = _refused(svc)
    with pytest.raises(openai.NotFoundError):
        svc.client(ADMIN).chat.completions.create(model="nope", messages=PROMPT)
    with pytest.raises(openai.AuthenticationError):
        svc.client("wrong-key").completions.create(model="chat", prompt="hi")
    assert (
        httpx.post(f"{svc.base}/v1/chat/completions", content=b"{}", headers=auth(ADMIN)).status_code == 400
    )
    assert _declared_too_large(svc.base, "/v1/chat/completions") == b"HTTP/1.1 413 Request Entity Too Large"
    foreign = httpx.post(
        f"{svc.base}/v1/models/m9/environments/production/predict", content=b"{}", headers=auth(ADMIN)
    )
    assert foreign.status_code == 404
    after = _refused(svc)
    grown = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    assert grown == {
        ("model_api", "404"): 1,
        ("model_api", "401"): 1,
        ("model_api", "400"): 1,
        ("model_api", "413"): 1,
        ("model", "404"): 1,
    }
    assert svc.series("baseten_model_api_incoming_inference_requests_total", model_api="nope") == 0


def test_unknown_or_foreign_model_apis_bad_bodies_and_keys(svc: Svc) -> None:
    for name in ("theirs", "nope"):
        with pytest.raises(openai.NotFoundError) as err:
            svc.client(ADMIN).chat.completions.create(model=name, messages=PROMPT)
        assert err.value.response.json() == {
            "error": f"no Model API {name!r}; list your organization's with GET /v1/model_apis"
        }
    resp = httpx.post(f"{svc.base}/v1/chat/completions", content=b"{}", headers=auth(ADMIN))
    assert resp.status_code == 400 and '"model"' in resp.json()["error"]
    with pytest.raises(openai.AuthenticationError):
        svc.client("wrong-key").chat.completions.create(model="chat", messages=PROMPT)
    assert svc.series("baseten_model_api_incoming_inference_requests_total", model_api="theirs") == 0


def test_a_replica_error_is_relayed_and_counted_by_status(svc: Svc) -> None:
    before = svc.series("baseten_model_api_inference_requests_total", team_id="", status_code="500")
    with pytest.raises(openai.InternalServerError):
        svc.client(ADMIN).chat.completions.create(
            model="chat", messages=PROMPT, extra_body={"script": {"status": 500}}
        )
    assert (
        svc.series("baseten_model_api_inference_requests_total", team_id="", status_code="500") == before + 1
    )


def test_the_metrics_api_reads_the_scraped_token_series_as_the_gateway_counts_them(svc: Svc) -> None:
    """After the calls above, the stored series (the in-process scrape, every second) give the Model API
    metrics endpoint the gateway's own totals, per team, in the model metrics response shape."""
    svc.client(TEAM_B).chat.completions.create(model="chat", messages=PROMPT, max_tokens=2)
    want = svc.tokens("team-b")

    def answered() -> dict[str, float | None]:
        now = int(time.time() * 1000)
        resp = httpx.get(
            f"{svc.base}/v1/model_apis/chat/metrics",
            params={"mode": "SUMMARY", "start_epoch_millis": now - 3_600_000, "end_epoch_millis": now + 1000},
            headers=auth(ADMIN),
            timeout=30,
        )
        assert resp.status_code == 200, resp.text
        schema_validator("GetModelMetricsResponseV1").validate(resp.json())
        body = resp.json()
        names = [d["name"] for d in body["metric_descriptors"]]
        if "baseten_model_api_tokens_total" not in names:
            return {}
        i = names.index("baseten_model_api_tokens_total")
        sets = body["metric_descriptors"][i]["label_sets"]
        values = body["metric_values"][0]["values"][i]
        return {ls["token_type"]: v for ls, v in zip(sets, values, strict=True) if ls["team_id"] == "team-b"}

    wait_until(lambda: answered() == want, f"the metrics API to read {want}", 30)
    team_b = httpx.get(
        f"{svc.base}/v1/model_apis/chat/metrics",
        params={"mode": "CURRENT", "team_ids[]": "team-b"},
        headers=auth(ADMIN),
        timeout=30,
    ).json()
    assert {ls["team_id"] for d in team_b["metric_descriptors"] for ls in d["label_sets"]} <= {"team-b"}
