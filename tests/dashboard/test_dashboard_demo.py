"""The dashboard in headless Chromium against ONE run of `servemetrics demo` shared by the module.

The demo (no ``--duration``: it runs until the module ends) promotes ``production`` from d1 to d2 60 s
after its load starts; the tests that need no promotion do not depend on it, the last one waits for the
PROMOTED event. Checked: every default graph the demo has data for renders with data; hiding and
reordering survive a reload; switching scope changes the API calls; a Promoted marker is on every graph
and its hover text names both deployments; then Ctrl-C ends the demo with its final tables.
Screenshots of the main page and the GPU usage page go to ``artifacts/``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.dashboard.browser import graphs, launch, new_context, screenshot, wait_drawn
from tests.dashboard.test_dashboard_model_apis import PANELS as MAPI_PANELS
from tests.dashboard.test_dashboard_model_apis import inspect as mapi_inspect
from tests.dashboard.test_dashboard_model_apis import totals as mapi_totals
from tests.processes import free_port, start, wait_for_scrapes, wait_http, wait_until

pytestmark = pytest.mark.e2e
KEY = "demo-dashboard-key"
PROMOTION_AFTER_S = 60
"""The demo without --duration promotes 60 s after its load started (demo.run.promotion_plan)."""
MODEL = "demo-model"


@dataclass
class Demo:
    base: str
    log: Path
    client: httpx.Client
    proc: subprocess.Popen[bytes]

    def series(self, names: list[str]) -> dict:
        now = int(time.time() * 1000)
        params = {"mode": "SERIES", "start_epoch_millis": now - 3_600_000, "end_epoch_millis": now}
        resp = self.client.get(
            f"{self.base}/v1/models/{MODEL}/environments/production/metrics",
            params={**params, "metrics": names},
        )
        if resp.status_code != 200:  # the traceback of a 500 is in the server's log, not the demo's output
            serve_log = self.log.parent / "d" / "logs" / "servemetrics-serve.log"
            tail = serve_log.read_text()[-6000:] if serve_log.exists() else "(no server log)"
            raise AssertionError(f"{resp.status_code} {resp.text[:500]}\n{tail}")
        return resp.json()


def _with_data(body: dict) -> set[str]:
    """Names of the metrics with at least one non-null value."""
    out = set()
    for i, d in enumerate(body["metric_descriptors"]):
        if any(v is not None for vs in body["metric_values"] for v in vs["values"][i]):
            out.add(d["name"])
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Demo]:
    tmp = tmp_path_factory.mktemp("demo")
    port = free_port()
    # no --duration: the demo runs until the module is done, however slow a busy machine makes the tests
    args = [
        "--port",
        str(port),
        "--api-key",
        KEY,
        "--data-dir",
        str(tmp / "d"),
    ]
    proc = start(["-m", "servemetrics", "demo", *args], tmp / "demo.out")
    client = httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/healthz", 60)
        demo = Demo(base, tmp / "demo.out", client, proc)
        deadline = time.monotonic() + 150  # the demo trains its models first: slow on a busy machine
        wanted = ["baseten_inference_requests_total", "baseten_gpu_utilization", "baseten_replicas_active"]
        while _with_data(demo.series(wanted)) != set(wanted):
            assert proc.poll() is None, demo.log.read_text()
            assert time.monotonic() < deadline, f"no data for {wanted}:\n{demo.log.read_text()[-3000:]}"
            time.sleep(2)
        yield demo
    finally:
        client.close()
        if proc.poll() is None:  # the last test interrupts it; a failed run stops it here
            proc.terminate()  # SIGTERM: the demo stops its processes at once
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_page(browser: Browser, demo: Demo, path: str = "/", calls: list[str] | None = None) -> Page:
    """A signed-in page at ``path``; the URL of each metrics request it makes, from the first, is
    appended to ``calls`` when given (listening after ``goto`` would miss the early ones)."""
    page = new_context(browser, KEY).new_page()
    if calls is not None:
        page.on("request", lambda r: calls.append(r.url) if "/metrics?" in r.url else None)
    page.goto(demo.base + path)
    return page


def default_panels(demo: Demo) -> dict[str, list[str]]:
    """Panel title -> its metric names, for the catalog's default-visible panels, in catalog order."""
    catalog = demo.client.get(f"{demo.base}/v1/metrics_catalog").json()
    panels: dict[str, list[str]] = {}
    for m in catalog["metrics"]:
        if m["default_visible"]:
            panels.setdefault(m["panel"], []).append(m["name"])
    return panels


def test_every_default_graph_with_demo_data_renders_with_data(browser, demo):
    panels = default_panels(demo)
    with_data = _with_data(demo.series([n for names in panels.values() for n in names]))
    expected = [title for title, names in panels.items() if set(names) & with_data]
    assert len(expected) >= 12, with_data  # requests, latency, sizes, replicas, CPU, memory, GPU ...
    page = open_page(browser, demo)
    wait_drawn(page)
    drawn = {g["title"]: g for g in graphs(page)}
    for title in expected:
        assert title in drawn, f"{title} not drawn; drawn: {sorted(drawn)}"
        assert sum(drawn[title]["nonNull"]) > 0, title
    # no graph for what the demo does not measure (a metric the answer omits: no series); asked after
    # the page drew, as series appear meanwhile. A metric with series and no value yet is drawn empty
    # (the vLLM replay's TTFT histogram: its recorded counts are 0, so they never grow)
    answer = demo.series([n for names in panels.values() for n in names])
    later = {d["name"] for d in answer["metric_descriptors"]}
    allowed = [title for title, names in panels.items() if set(names) & later]
    assert [t for t in drawn if t not in allowed] == [], sorted(drawn)
    assert [t for t in allowed if t in drawn] == list(drawn)  # catalog order (engine groups after)
    page.context.close()


def _order(page: Page) -> list[str]:
    return page.locator("#graphs section.graph h2").all_inner_texts()


def test_hiding_and_reordering_survive_a_reload(browser, demo):
    page = open_page(browser, demo)
    wait_drawn(page)
    # no auto-refresh render (every 30 s) in the middle of the drags on a slow machine: only ours count
    page.uncheck("#autorefresh")
    before = _order(page)
    assert before[:3] == ["Inference volume", "Incoming request volume", "End-to-end response time"]
    renders = int(page.locator("#graphs").get_attribute("data-renders") or 0)
    page.click("#customize-button")
    page.uncheck("#customize-incoming-request-volume")  # hide
    wait_drawn(page, renders=renders + 1)
    page.click('button[aria-label="Move Replicas up"]')  # button
    page.locator('#customize-list li[data-panel="cpu-usage"] input').focus()
    page.keyboard.press("Alt+ArrowUp")  # keyboard
    page.locator('#customize-list li[data-panel="gpu-usage"]').drag_to(
        page.locator('#customize-list li[data-panel="inference-volume"]')
    )  # drag: GPU usage takes Inference volume's place, first
    listed = page.locator("#customize-list li label").all_inner_texts()
    page.click("#customize-close")
    page.wait_for_function("document.getElementById('graphs').dataset.renderState === 'done'")
    after = _order(page)
    assert "Incoming request volume" not in after
    assert after[0] == "GPU usage"
    # catalog order: ... Response size, Replicas, ... Concurrent requests, CPU usage: each moved up one
    assert after.index("Replicas") == after.index("Response size") - 1
    assert after.index("CPU usage") == after.index("Concurrent requests") - 1

    page.reload()
    wait_drawn(page)
    reloaded = _order(page)  # graphs whose data arrived meanwhile (async) may join, in their place
    assert [t for t in reloaded if t in after] == after
    assert "Incoming request volume" not in reloaded
    page.click("#customize-button")
    assert page.locator("#customize-list li label").all_inner_texts() == listed  # hidden one still listed
    assert not page.is_checked("#customize-incoming-request-volume")
    page.click("#customize-close")
    page.context.close()


def test_switching_scope_changes_the_api_calls(browser, demo):
    calls: list[str] = []
    page = open_page(browser, demo, calls=calls)
    wait_drawn(page)
    assert calls and all(f"/v1/models/{MODEL}/environments/production/metrics?" in u for u in calls)
    assert all("mode=SERIES" in u for u in calls)
    calls.clear()
    # the switch asks for the deployment's series (and its engines, which may redraw the page: wait for
    # the request, not for a render count)
    d1 = f"/v1/models/{MODEL}/deployments/d1/metrics?"
    with page.expect_request(lambda r: d1 in r.url, timeout=60_000):
        page.select_option("#scope", "deployment:d1")
    wait_drawn(page)
    assert calls and calls[-1].split("/v1/")[1].startswith(d1.split("/v1/")[1])
    page.reload()  # the scope is remembered per model
    wait_drawn(page)
    assert page.input_value("#scope") == "deployment:d1"
    production = f"/v1/models/{MODEL}/environments/production/metrics?"
    with page.expect_request(lambda r: production in r.url, timeout=60_000):
        page.select_option("#scope", "environment:production")
    wait_drawn(page)
    page.context.close()


def _promoted(demo: Demo, deadline_s: float) -> dict:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        events = demo.client.get(f"{demo.base}/v1/models/{MODEL}/events", params={"kinds": "PROMOTED"}).json()
        found = [e for e in events["events"] if e["deployment_id"] == "d2"]
        if found:
            return found[0]
        time.sleep(1)
    raise AssertionError(f"no PROMOTED event for d2 within {deadline_s} s:\n{demo.log.read_text()[-3000:]}")


def test_promoted_marker_on_every_graph_names_both_deployments(browser, demo):
    promoted = _promoted(demo, PROMOTION_AFTER_S + 120)
    wait_for_scrapes(demo.base, 2)  # a scrape after the promotion, so the graphs show the new value sets
    page = open_page(browser, demo)
    wait_drawn(page)
    page.click("#events-button")
    page.check("#events-show")
    page.wait_for_selector('.event-marker[data-kind="PROMOTED"]')
    n_graphs = page.locator("#graphs section.graph").count()
    shown = page.evaluate("window.smDashboard.metrics.events().filter(e => e.kind === 'PROMOTED')")
    # production -> d1 when the demo starts, then -> d2 (25 %, rolling): both inside the last hour; on a
    # slow machine the page may also hold the end of the promotion (d2 at 100 %, 40 s after its start)
    got = [
        (e["deployment_id"], e["details"]["previous_deployment_id"], e["details"]["percent"]) for e in shown
    ]
    assert got[:2] == [("d1", None, 100), ("d2", "d1", 25)] and got[2:] in ([], [("d2", "d1", 100)])
    assert shown[1]["epoch_millis"] == promoted["epoch_millis"]
    # the flag of the d2 promotion at 25 % (alone, or in a cluster with d2's DEPLOYED of the same instant
    # and, on a slow machine, the promotion's end 40 s later)
    flags = page.locator(
        '#graphs .event-flag[aria-label*="Promoted, "][aria-label*="deployment: d2,"]'
        '[aria-label*="percent: 25"]'
    )
    assert flags.count() == n_graphs  # one such flag on every graph
    markers = page.locator('#graphs section.graph .event-marker[data-kind="PROMOTED"]')
    assert markers.count() == len(shown) * n_graphs  # every event keeps its own line
    flags.first.hover()
    page.wait_for_selector("#tooltip:not([hidden])")
    blocks = page.locator("#tooltip .tooltip-event").all_inner_texts()
    tip = next(b for b in blocks if b.startswith("Promoted") and "deployment: d2" in b)
    assert "deployment: d2" in tip and "previous deployment: d1" in tip and "environment: production" in tip
    assert "percent: 25" in tip
    page.click("#events-button")  # close the panel for the screenshot, keep the markers
    page.mouse.move(5, 5)
    screenshot(page, "dashboard.png")

    page.goto(demo.base + "/#/gpu-usage")
    page.wait_for_selector("#gpu-graph[data-render-state=done]")
    assert page.evaluate("window.smDashboard.gpu.inspect().groups") == ["RTX4000ADA"]
    screenshot(page, "gpu-usage-demo.png")
    page.context.close()


def _support_limited(demo: Demo) -> float:
    """Team support's rate-limited calls stored so far (the API's SUMMARY over the last hour)."""
    now = int(time.time() * 1000)
    body = demo.client.get(
        f"{demo.base}/v1/model_apis/demo-chat/metrics",
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": now - 3_600_000,
            "end_epoch_millis": now,
            "metrics": ["baseten_model_api_rate_limited_requests_total"],
            "team_ids[]": "support",
        },
    ).json()
    return sum(v or 0 for vs in body.get("metric_values", []) for row in vs["values"] for v in row)


def test_the_model_apis_tab_draws_the_demos_two_teams(browser, demo):
    """Issue 17 part 5 with the demo's data: ``demo-chat`` listed, every graph of the tab draws data, the
    two teams' lines, support's rate-limited line (12 calls a minute for 1 a second) and none for
    research, and the drawn token totals equal the API's SERIES for the page's own window."""
    wait_until(lambda: _support_limited(demo) > 0, "support's first rate-limited call stored", 120)
    page = open_page(browser, demo, "/#/model-apis?api=demo-chat&range=15m")
    wait_drawn(page, graphs_id="mapi-graphs")
    assert page.eval_on_selector_all("#mapi-name option", "os => os.map(o => o.value)") == ["demo-chat"]
    state = mapi_inspect(page)
    assert state["teams"] == ["research", "support"]
    assert [g["title"] for g in state["graphs"]] == MAPI_PANELS
    for g in state["graphs"]:
        assert any(v for ys in g["ys"] for v in ys if v is not None), g["title"]
    limited = {
        team: total for (team, _), total in mapi_totals(state, "Model API rate limited requests").items()
    }
    assert limited.get("support", 0) > 0 and limited.get("research", 0) == 0, limited
    body = demo.client.get(
        f"{demo.base}/v1/model_apis/demo-chat/metrics",
        params={
            "mode": "SERIES",
            "start_epoch_millis": state["start"],
            "end_epoch_millis": state["end"],
            "metrics": ["baseten_model_api_tokens_total"],
        },
    ).json()
    [d] = body["metric_descriptors"]
    want = {
        (labels["team_id"], labels["token_type"]): sum(
            vs["values"][0][i] or 0 for vs in body["metric_values"]
        )
        for i, labels in enumerate(d["label_sets"])
    }
    drawn = mapi_totals(state, "Model API total tokens")
    assert {k: v for k, v in want.items() if v} == pytest.approx({k: v for k, v in drawn.items() if v})
    page.context.close()


def _value(table: str, metric: str) -> str:
    """The value column of ``metric``'s row in a table the demo printed."""
    [row] = [line for line in table.splitlines() if re.match(rf"│ {metric}\s+│", line)]
    return row.split("│")[-2].strip()


def test_ctrl_c_prints_the_final_tables_and_windows_start_with_the_data(demo):
    """The last test of the module (it ends the demo). Issue 15: the first SUMMARY's window starts when the
    load does, so replicas_active is the 2 replicas that served it (a window from before the service
    existed averaged in time without replicas); Ctrl-C: one more scrape, the final tables, exit 130."""
    wait_until(lambda: "Loops trainer" in demo.log.read_text(), "the first tables (Loops is their last)", 120)
    first = demo.log.read_text()
    summary = first[first.index("SUMMARY since the load started") :]
    assert _value(summary, "replicas_active") == "2"
    demo.proc.send_signal(signal.SIGINT)
    assert demo.proc.wait(timeout=120) == 130
    out = demo.log.read_text()
    after = out[out.index("interrupted: one more scrape") :]
    assert "Tables at the interruption" in after
    for title in ("CURRENT", "SUMMARY since the load started", "SERIES", "ENGINE d1", "Loops trainer"):
        assert title in after, after
    assert "requests counted by the client:" in after
    assert after.rstrip().endswith("stopped every process")
