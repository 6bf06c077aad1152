"""The dashboard's Model APIs tab (issue 17 part 5) in headless Chromium against a real `servemetrics
serve` in front of a real examples/openai_replica.py, called with the official `openai` client.

acme has teams team-a (3 requests / minute on ``chat``) and team-b (the default, 1000 / minute), an
invoking key each and an admin key without a team (the page's key; its readiness calls are the "no team"
lines); ``chat`` and ``notes`` are served by m1's production (d1, one replica). team-a sends
``A_CALLS`` non-streamed calls, of which the ones over its limit get 429s; team-b streams ``B_CALLS``
answers of chunks [1, 3, 2] with ``include_usage`` and 2 cached prompt tokens. The test adds up the
tokens each client's ``usage`` reported and the 429s it saw, then reads the tab: it lists both Model
APIs, draws every graph of the catalog's "Model APIs" group with data, its token and request lines add
up (each value × its value set's share of the step, series.js) to the client's numbers, its latency,
size and decode lines are the API's values for the page's window, ticking team-b leaves only team-b's
lines (and sends ``team_ids[]=team-b``), and no event is drawn or fetched though m1 has one there (an
autoscaling change). Signed in with team-b's metrics key, the tab shows team-b's lines only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from playwright.sync_api import Browser, Page

from tests.apptools import auth
from tests.dashboard.browser import launch, new_context, screenshot, wait_drawn
from tests.model_api_service import PROMPT, model_api_service, openai_client
from tests.processes import (
    wait_for_scrapes,
    wait_until,
)

pytestmark = pytest.mark.e2e
ADMIN, TEAM_A, TEAM_B = "mapi-dash-admin", "mapi-dash-team-a", "mapi-dash-team-b"
B_METRICS = "mapi-dash-team-b-metrics"
"""A metrics-reading key of team-b: it sees team-b's series only."""
A_CALLS, B_CALLS, A_LIMIT = 6, 3, 3
P = "baseten_model_api_"
PANELS = [
    "Model API inference volume",
    "Model API incoming requests",
    "Model API rate limited requests",
    "Model API end-to-end response time",
    "Model API time to first token",
    "Model API request size",
    "Model API response size",
    "Model API time per output token",
    "Model API decode tokens per second",
    "Model API total tokens",
]
"""The catalog's "Model APIs" panels, in catalog order (catalog/model_apis.py)."""
DISTRIBUTIONS = {
    P + "end_to_end_response_time_seconds",
    P + "time_to_first_token_seconds",
    P + "request_size_bytes",
    P + "response_size_bytes",
    P + "time_per_output_token_seconds",
    P + "decode_tokens_per_second",
}
"""Metrics drawn as the API answers them (no per-step scaling)."""


@dataclass
class Calls:
    """What the clients saw: tokens by team and type, answers by team and status class."""

    tokens: dict[str, dict[str, int]]
    answers: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Svc:
    base: str
    calls: Calls


def _add_usage(calls: Calls, team: str, usage: Any) -> None:
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    got = calls.tokens.setdefault(team, {"input_cached": 0, "input_uncached": 0, "output": 0})
    got["input_cached"] += cached
    got["input_uncached"] += usage.prompt_tokens - cached
    got["output"] += usage.completion_tokens


def _send(base: str) -> Calls:
    """team-a's calls (some over its limit) and team-b's streams; what their clients saw."""
    calls = Calls(tokens={}, answers={"team-a": {"2xx": 0, "4xx": 0}, "team-b": {"2xx": 0, "4xx": 0}})
    with openai_client(base, TEAM_A) as a:
        for _ in range(A_CALLS):
            try:
                answer = a.chat.completions.create(model="chat", messages=PROMPT, max_tokens=2)
            except openai.RateLimitError:
                calls.answers["team-a"]["4xx"] += 1
                continue
            calls.answers["team-a"]["2xx"] += 1
            _add_usage(calls, "team-a", answer.usage)
    with openai_client(base, TEAM_B) as b:
        for _ in range(B_CALLS):
            stream = b.chat.completions.create(
                model="chat",
                messages=PROMPT,
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"script": {"chunks": [1, 3, 2], "gap_ms": 20, "cached": 2}},
            )
            chunks = list(stream)
            calls.answers["team-b"]["2xx"] += 1
            _add_usage(calls, "team-b", chunks[-1].usage)
    return calls


def _summary_tokens(base: str) -> dict[str, dict[str, float]]:
    """SUMMARY of the last 15 minutes' tokens: {team: {token_type: tokens}}."""
    body = httpx.get(
        f"{base}/v1/model_apis/chat/metrics",
        params={"mode": "SUMMARY", "metrics": P + "tokens_total"},
        headers=auth(ADMIN),
        timeout=10,
    ).json()
    out: dict[str, dict[str, float]] = {}
    for d, row in zip(body["metric_descriptors"], body["metric_values"][0]["values"], strict=True):
        for labels, v in zip(d["label_sets"], row, strict=True):
            out.setdefault(labels["team_id"], {})[labels["token_type"]] = v
    return out


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Svc]:
    tmp = tmp_path_factory.mktemp("mapi-dash")
    organizations = [
        {
            "name": "acme",
            "teams": [{"id": "team-a"}, {"id": "team-b"}],
            "api_keys": [
                {"key": ADMIN, "type": "WORKSPACE_MANAGE_ALL"},
                {"key": TEAM_A, "type": "WORKSPACE_INVOKE", "team": "team-a"},
                {"key": TEAM_B, "type": "WORKSPACE_INVOKE", "team": "team-b"},
                {"key": B_METRICS, "type": "WORKSPACE_EXPORT_METRICS", "team": "team-b"},
            ],
        }
    ]
    model_apis = [
        {
            "name": "chat",
            "organization": "acme",
            "model": "m1",
            "limits": {"requests_per_minute": 1000},
            "team_limits": {"team-a": {"requests_per_minute": A_LIMIT}},
        },
        {"name": "notes", "organization": "acme", "model": "m1"},
    ]
    with model_api_service(tmp, organizations, model_apis, ADMIN) as base:
        calls = _send(base)
        # an event of m1 inside the tab's window, which the Model APIs tab must not draw
        resp = httpx.patch(
            f"{base}/v1/models/m1/deployments/d1/autoscaling_settings",
            json={"max_replica": 3},
            headers=auth(ADMIN),
            timeout=10,
        )
        assert resp.status_code == 200, resp.text
        wait_for_scrapes(base, 2, "gateway")
        wait_until(
            lambda: _summary_tokens(base).get("team-b") == calls.tokens["team-b"],
            "team-b's tokens in the store",
            30,
        )
        yield Svc(base, calls)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_tab(browser: Browser, svc: Svc, requests: list[str], key: str = ADMIN) -> Page:
    """The Model APIs tab of ``chat`` over the last 15 minutes signed in with ``key``, events switched on
    in the prefs."""
    context = new_context(browser, key)
    context.add_init_script("localStorage.setItem('servemetrics.prefs', JSON.stringify({showEvents: true}))")
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(svc.base + "/#/model-apis?api=chat&range=15m")
    try:
        wait_drawn(page, graphs_id="mapi-graphs")
    except Exception:
        status = page.text_content("#mapi-status"), page.text_content("#mapi-error")
        raise AssertionError(f"not drawn: status, error {status}; page errors {errors}") from None
    return page


def inspect(page: Page) -> dict[str, Any]:
    return page.evaluate("window.smDashboard.modelApis.inspect()")


def totals(state: dict[str, Any], title: str) -> dict[tuple[str | None, str], float]:
    """{(team, label set name): the line's total} of a per-step counter graph: each drawn value times
    its value set's share of the step (series.js scales a shorter value set up to the step)."""
    g = next(g for g in state["graphs"] if g["title"] == title)
    x, step_ms = g["x"], state["step"] * 1000
    lengths = [(x[i + 1] if i + 1 < len(x) else state["end"]) - x[i] for i in range(len(x))]
    out = {}
    for team, labels, ys in zip(g["teams"], g["labels"], g["ys"], strict=True):
        name = " ".join(labels.values())
        out[(team, name)] = sum(
            v * min(ln, step_ms) / step_ms for v, ln in zip(ys, lengths, strict=True) if v is not None
        )
    return out


def api_series(svc: Svc, state: dict[str, Any], metrics: list[str]) -> dict[tuple[str, str], list]:
    """{(metric, label set as JSON): values} of the API's SERIES answer for the page's own window."""
    body = httpx.get(
        f"{svc.base}/v1/model_apis/chat/metrics",
        params={
            "mode": "SERIES",
            "start_epoch_millis": state["start"],
            "end_epoch_millis": state["end"],
            "metrics": metrics,
        },
        headers=auth(ADMIN),
        timeout=10,
    ).json()
    out = {}
    for di, d in enumerate(body["metric_descriptors"]):
        for li, labels in enumerate(d["label_sets"]):
            key = (d["name"], repr(sorted(labels.items())))
            out[key] = [vs["values"][di][li] for vs in body["metric_values"]]
    return out


def test_the_tab_lists_the_model_apis_and_draws_every_graph_with_the_clients_numbers(browser, svc):
    requests: list[str] = []
    page = open_tab(browser, svc, requests)
    options = page.eval_on_selector_all("#mapi-name option", "os => os.map(o => o.value)")
    assert options == ["chat", "notes"]
    state = inspect(page)
    assert state["name"] == "chat" and state["step"] == 30 and state["teams"] == ["team-a", "team-b"]
    assert [g["title"] for g in state["graphs"]] == PANELS
    for g in state["graphs"]:  # every graph draws data: a non-zero value on some line
        assert any(v for ys in g["ys"] for v in ys if v is not None), g["title"]
    assert next(g for g in state["graphs"] if g["title"] == PANELS[-1])["unit"] == "tokens per 30 s"

    calls, a_ok, a_429 = svc.calls, svc.calls.answers["team-a"]["2xx"], svc.calls.answers["team-a"]["4xx"]
    assert a_ok >= A_LIMIT and a_ok + a_429 == A_CALLS and a_429 >= A_CALLS - A_LIMIT - 1
    tokens = totals(state, "Model API total tokens")
    for team in ("team-a", "team-b"):
        for kind, want in calls.tokens[team].items():
            assert tokens.get((team, kind), 0) == pytest.approx(want), (team, kind)
    # by hand: 5 prompt words (2 of them cached for team-b's streams); 2 tokens a call, 6 a stream
    assert calls.tokens["team-a"] == {"input_cached": 0, "input_uncached": 5 * a_ok, "output": 2 * a_ok}
    assert calls.tokens["team-b"] == {"input_cached": 6, "input_uncached": 9, "output": 18}
    volume = totals(state, "Model API inference volume")
    assert volume[("team-a", "2xx")] == pytest.approx(a_ok)
    assert volume[("team-a", "4xx")] == pytest.approx(a_429)
    assert volume[("team-b", "2xx")] == pytest.approx(B_CALLS)
    limited = totals(state, "Model API rate limited requests")
    assert limited == pytest.approx({("team-a", ""): a_429})  # team-b was never limited: no line
    incoming = totals(state, "Model API incoming requests")
    assert incoming[("team-a", "")] == pytest.approx(A_CALLS)
    assert incoming[("team-b", "")] == pytest.approx(B_CALLS)

    # latency, size and decode speed: exactly the API's values for the page's window
    want = api_series(svc, state, sorted(DISTRIBUTIONS))
    for g in state["graphs"]:
        for metric, team, labels, ys in zip(g["metrics"], g["teams"], g["labels"], g["ys"], strict=True):
            if metric in DISTRIBUTIONS:
                assert ys == want[(metric, repr(sorted({"team_id": team, **labels}.items())))], g["title"]
    decode = next(g for g in state["graphs"] if g["title"] == "Model API decode tokens per second")
    assert decode["lines"] == ["team-b avg", "team-b p50", "team-b p1"]  # only team-b streamed
    assert decode["unit"] == "tokens/s"

    # no events overlay: none fetched, none drawn, though m1 has events in this window
    events = httpx.get(
        f"{svc.base}/v1/models/m1/events",
        params={"start_epoch_millis": state["start"], "end_epoch_millis": state["end"]},
        headers=auth(ADMIN),
        timeout=10,
    ).json()["events"]
    assert [e["kind"] for e in events] == ["AUTOSCALING_CHANGED"]
    assert not [u for u in requests if "/v1/" in u and "/events" in u]
    assert (
        page.locator("#mapi-page .event-flag, #mapi-page .event-marker, #mapi-page .event-layer").count() == 0
    )
    screenshot(page, "model-apis.png")
    page.context.close()


def test_the_team_filter_leaves_only_the_chosen_teams_lines(browser, svc):
    requests: list[str] = []
    page = open_tab(browser, svc, requests)
    before = inspect(page)
    assert {t for g in before["graphs"] for t in g["teams"]} == {"", "team-a", "team-b"}
    page.check("#mapi-team-team-b")
    wait_drawn(page, 2, graphs_id="mapi-graphs")
    after = inspect(page)
    assert any("team_ids%5B%5D=team-b" in u for u in requests if "/v1/model_apis/chat/metrics" in u)
    assert "teams=team-b" in page.evaluate("location.hash")
    for g in after["graphs"]:
        assert set(g["teams"]) == {"team-b"}, g["title"]
    # team-b was never rate limited: that graph has no line for it
    assert "Model API rate limited requests" not in [g["title"] for g in after["graphs"]]
    tokens = totals(after, "Model API total tokens")
    assert {k: v for (t, k), v in tokens.items()} == pytest.approx(
        {k: float(v) for k, v in svc.calls.tokens["team-b"].items()}
    )
    page.click("#mapi-team-reset")
    wait_drawn(page, 3, graphs_id="mapi-graphs")
    assert {t for g in inspect(page)["graphs"] for t in g["teams"]} == {"", "team-a", "team-b"}
    page.context.close()


def test_a_teams_metrics_key_sees_only_its_team(browser, svc):
    page = open_tab(browser, svc, [], key=B_METRICS)
    state = inspect(page)
    assert state["teams"] == ["team-b"]
    assert [g["title"] for g in state["graphs"]] == [
        p for p in PANELS if p != "Model API rate limited requests"
    ]
    for g in state["graphs"]:
        assert set(g["teams"]) == {"team-b"}, g["title"]
    volume = totals(state, "Model API inference volume")
    assert volume == pytest.approx({("team-b", "2xx"): B_CALLS})  # 4xx and 5xx: 0 throughout, left out
    page.context.close()
