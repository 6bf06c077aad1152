"""Engine graphs in headless Chromium against the pinned service (``pinned_service.py``: d1 of m1 exposes
vLLM with two data-parallel engine cores; x1 of m2 and d2 expose no engine): the Engine and LLM groups
under their headings with hand-checked values for a vLLM deployment, none for a deployment without an
engine (not drawn, not listed in Customize view), and a hidden engine graph listed in Customize view and
shown from there (issue 13 part 5).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser, Page

from tests.dashboard.browser import graphs, launch, new_context, screenshot, wait_drawn
from tests.dashboard.pinned_service import KEY, NOW, Pinned, pinned_service

pytestmark = pytest.mark.e2e
SHOWN_ENGINE = [
    "vllm-requests",
    "vllm-kv-cache-usage",
    "vllm-ttft",
    "vllm-inter-token-latency",
    "vllm-output-token-throughput",
]
"""The vLLM graphs shown by default, in catalog order (catalog/engine_rows.py SHOWN)."""


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Pinned]:
    with pinned_service(tmp_path_factory.mktemp("engines")) as svc:
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_page(browser: Browser, service: Pinned, path: str = "/", urls: list[str] | None = None) -> Page:
    """A page at ``path``; the URL of every request it makes is appended to ``urls`` when given."""
    page = new_context(browser, KEY).new_page()
    page.clock.set_fixed_time(datetime.fromtimestamp(NOW / 1000, UTC))
    if urls is not None:
        page.on("request", lambda r: urls.append(r.url))
    page.goto(service.base + path)
    return page


def step(graph: dict, line: str, k: int = 30) -> float:
    """Value of ``line`` in value set ``k`` of a drawn graph."""
    return graph["ys"][graph["lines"].index(line)][k]


def customize_rows(page: Page) -> list[str]:
    return page.locator("#customize-list li[data-panel]").evaluate_all(
        "rows => rows.map(r => r.dataset.panel)"
    )


def test_a_vllm_deployment_shows_the_engine_graphs_with_data(browser, service):
    urls: list[str] = []
    page = open_page(browser, service, urls=urls)  # m1, production = d1
    wait_drawn(page)
    drawn = {g["id"]: g for g in graphs(page)}
    engine = [g["id"] for g in graphs(page) if g["group"]]
    assert engine == SHOWN_ENGINE  # after every platform graph, Engine then LLM
    assert [g["group"] for g in graphs(page) if g["group"]] == ["Engine"] * 4 + ["LLM"]
    headings = page.locator("#graphs .group-heading").all_inner_texts()
    assert headings == ["Engine", "LLM"]
    for gid in SHOWN_ENGINE:
        assert all(n == 120 for n in drawn[gid]["nonNull"]), gid  # 120 steps in the hour, all with data
    requests = drawn["vllm-requests"]
    # data-parallel engine cores add up: running 3 + 2, waiting 1 + 0
    assert (step(requests, "Running"), step(requests, "Waiting")) == (5, 1)
    assert step(drawn["vllm-kv-cache-usage"], "vLLM KV-cache usage") == 0.5  # mean of 0.25 and 0.75
    ttft = drawn["vllm-ttft"]
    assert ttft["lines"] == ["p50", "p90", "p95", "p99", "avg"]
    # per step 20 requests: 10 in (0, 0.1], 10 in (0.1, 0.5]; sum 4 s
    # p50: rank 10 -> 0.1 s; p90: rank 18 -> 0.1 + 0.4 * 8 / 10 = 0.42 s; avg 4 / 20 = 0.2 s
    assert step(ttft, "p50") == pytest.approx(0.1)
    assert step(ttft, "p90") == pytest.approx(0.42)
    assert step(ttft, "avg") == pytest.approx(0.2)
    itl = drawn["vllm-inter-token-latency"]
    assert step(itl, "avg") == pytest.approx(0.025)  # 2.5 s / 100 tokens
    # output tokens/s: 600 generated tokens per 30 s step
    assert step(drawn["vllm-output-token-throughput"], "vLLM output token throughput") == pytest.approx(20)
    assert drawn["vllm-output-token-throughput"]["unit"] == "tokens/s"
    # one detection call for the scope, before the SERIES call
    engines = [i for i, u in enumerate(urls) if "/engines?" in u]
    series = [i for i, u in enumerate(urls) if "/metrics?" in u]
    assert [urls[i] for i in engines] == [service.base + "/v1/models/m1/engines?environment=production"]
    assert len(series) == 1 and engines[0] < series[0]
    # reloaded with the model known: index.html starts the call with the first ones, the page takes it over
    urls.clear()
    page.reload()
    wait_drawn(page)
    assert [u for u in urls if "/engines?" in u] == [
        service.base + "/v1/models/m1/engines?environment=production"
    ]
    screenshot(page, "engine-graphs.png")
    page.context.close()


def test_a_deployment_without_an_engine_has_no_engine_graph(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    page.select_option("#model", "m2")  # x1: replicas only
    page.wait_for_function(
        "() => { const g = window.smDashboard.metrics.inspect();"
        " return g.length > 0 && g.every(x => !x.id.startsWith('vllm')); }"
    )
    wait_drawn(page)
    assert [g["group"] for g in graphs(page)] == [""] * len(graphs(page))
    assert page.locator("#graphs .group-heading").count() == 0
    page.click("#customize-button")
    rows = customize_rows(page)
    assert "replicas" in rows and "websocket-connections" in rows  # hidden platform graphs stay listed
    assert not [r for r in rows if r.startswith(("vllm", "sglang"))]
    assert page.locator("#customize-list .group-heading").count() == 0
    page.context.close()


def test_hidden_engine_graphs_are_listed_in_customize_view_and_can_be_shown(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    page.click("#customize-button")
    rows = customize_rows(page)
    # only vLLM's graphs apply to d1 (no SGLang row), listed by group under the headings
    assert not [r for r in rows if r.startswith("sglang")]
    assert page.locator("#customize-list .group-heading").all_inner_texts() == ["Engine", "LLM"]
    assert rows.index("vllm-requests") < rows.index("vllm-ttft") < rows.index("vllm-decode-tokens-per-second")
    assert not page.is_checked("#customize-vllm-decode-tokens-per-second")  # hidden by default
    assert page.is_checked("#customize-vllm-ttft")
    # Up is off on the first graph of a group: graphs move inside their group only
    assert page.is_disabled('#customize-list li[data-panel="vllm-requests"] .move-up')
    page.check("#customize-vllm-decode-tokens-per-second")
    wait_drawn(page, renders=2)
    page.click("#customize-close")
    decode = next(g for g in graphs(page) if g["id"] == "vllm-decode-tokens-per-second")
    assert decode["group"] == "LLM" and decode["unit"] == "tokens/s"
    # from the ITL histogram per step: 50 in (0, 0.02], 50 in (0.02, 0.05], sum 2.5 s
    # mean speed = count / sum = 100 / 2.5 = 40; median = 1 / p50 = 1 / 0.02 = 50;
    # p1 = 1 / p99 = 1 / (0.02 + 0.03 * 49 / 50) = 1 / 0.0494
    assert decode["lines"] == ["avg", "p50", "p1"]
    assert step(decode, "avg") == pytest.approx(40)
    assert step(decode, "p50") == pytest.approx(50)
    assert step(decode, "p1") == pytest.approx(1 / 0.0494)
    page.context.close()
