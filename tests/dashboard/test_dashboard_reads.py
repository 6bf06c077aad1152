"""The dashboard reads right (issue 15), in headless Chromium against a pinned service of its own (clock
and browser at T0 + 1 h, ``pinned_service.py``) holding model m3 ("steady"):

- production served by e1 since 2025-12-31, then by e2 from a promotion at T0 + 1815 s, mid-step: the
  1 h SERIES has 121 value sets, [T0 + 1800 s, + 1815 s) and [+ 1815 s, + 1830 s) among them.
- ``baseten_inference_requests_total{status_code=200}``: a steady 1 request/s, sampled every 15 s
  (+15 a sample), by e1 until the promotion and by e2 from 0 at it.
- ``baseten_concurrent_requests`` of e1: 3 every 10 s in [T0, T0 + 1200 s) but none in [T0 + 270 s, + 300 s)
  and [+ 330 s, + 360 s): value sets 9 and 11 are null, 10 is a lone point between gaps (its sample at
  T0 + 300 s) among lines too dense for uPlot to draw their points.
- ``baseten_replicas_active`` 2 (every 10 s) of the deployment serving, as its replicas export it; no
  ``baseten_replicas_desired`` (the service does not know m3's autoscaling settings: the gateway writes
  none, tests/gateway/test_known_settings.py) and no async series (no async traffic).
- events: the declarations' DEPLOYED e2 and PROMOTED e2 at T0 + 1815 s, then ACTIVATED e2 at + 1820 s and
  DEACTIVATED e1 at + 1830 s (2 and 6 px from the promotion on a 1 h axis: one cluster of 4), and
  AUTOSCALING_CHANGED e2 at + 600 s (alone); the rest of the declarations' lie before the window.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import Browser, Page

from servemetrics.store.memory import MemoryStore
from tests.apptools import org
from tests.dashboard.browser import graphs, launch, line_pixels_in_column, new_context, wait_drawn
from tests.dashboard.pinned_service import NOW, T0, Pinned, pinned_service
from tests.query.helpers import series, store_with

pytestmark = pytest.mark.e2e
KEY = "sm-dashboard-reads-key"
PROMOTION_S = 1815
"""Seconds after T0 of the promotion e1 -> e2: half way into value set 60's step."""


def steady_store() -> MemoryStore:
    """The samples of the module docstring."""
    e1 = [(s, s + 60) for s in range(-60, PROMOTION_S + 1, 15)]  # 0 at -60 s, +15 every 15 s
    e2 = [(s, s - PROMOTION_S) for s in range(PROMOTION_S, 3601, 15)]
    active_e1 = [(s, 2) for s in range(-60, PROMOTION_S, 10)]
    active_e2 = [(s, 2) for s in range(PROMOTION_S + 5, 3601, 10)]
    concurrency = [(s, 3) for s in range(0, 1200, 10) if not (270 <= s < 300 or 330 <= s < 360)]
    return store_with(
        series("baseten_inference_requests_total", e1, model_id="m3", deployment_id="e1", status_code="200"),
        series("baseten_inference_requests_total", e2, model_id="m3", deployment_id="e2", status_code="200"),
        series("baseten_concurrent_requests", concurrency, model_id="m3", deployment_id="e1"),
        series("baseten_replicas_active", active_e1, model_id="m3", deployment_id="e1"),
        series("baseten_replicas_active", active_e2, model_id="m3", deployment_id="e2"),
    )


def steady_declarations() -> dict:
    """Organization acme with ``KEY``; model m3 with e1 and e2 and the promotion of the docstring."""
    promoted = datetime.fromtimestamp((T0 + PROMOTION_S * 1000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    production = {
        "name": "production",
        "promotions": [
            {"deployment": "e1", "at": "2025-12-31T00:00:00Z"},
            {"deployment": "e2", "at": promoted},
        ],
    }
    return {
        "organizations": [org("acme", {KEY: "WORKSPACE_MANAGE_ALL"})],
        "models": [
            {
                "id": "m3",
                "name": "steady",
                "organization": "acme",
                "deployments": [{"id": "e1", "name": "v1"}, {"id": "e2", "name": "v2"}],
                "environments": [production],
            }
        ],
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Pinned]:
    tmp = tmp_path_factory.mktemp("reads")
    with pinned_service(tmp, store=steady_store(), decls=steady_declarations()) as svc:
        events = svc.app.state.service.registry.events
        events.record_event("m3", "ACTIVATED", at_ms=T0 + 1_820_000, deployment_id="e2")
        events.record_event("m3", "DEACTIVATED", at_ms=T0 + 1_830_000, deployment_id="e1")
        change = {"old": {"min_replica": 1, "max_replica": 2}, "new": {"min_replica": 2, "max_replica": 2}}
        events.record_event(
            "m3", "AUTOSCALING_CHANGED", at_ms=T0 + 600_000, deployment_id="e2", details=change
        )
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_page(browser: Browser, service: Pinned, path: str = "/") -> Page:
    page = new_context(browser, KEY).new_page()
    page.clock.set_fixed_time(datetime.fromtimestamp(NOW / 1000, UTC))
    page.goto(service.base + path)
    return page


def api_series(service: Pinned, names: list[str]) -> dict:
    """The 1 h SERIES answer of m3's production for ``names``, as the page asks for it."""
    answer = httpx.get(
        f"{service.base}/v1/models/m3/environments/production/metrics",
        params={
            "mode": "SERIES",
            "start_epoch_millis": NOW - 3_600_000,
            "end_epoch_millis": NOW,
            "metrics": ",".join(names),
        },
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def drawn_data(page: Page, panel: str) -> list[list[float | None]]:
    """uPlot's own data of ``panel``'s chart: ``[x, y1, y2, ...]``."""
    return page.evaluate("id => window.smDashboard.metrics.uplot(id).data", panel)


def test_a_steady_load_draws_a_flat_line_across_a_promotion(browser, service):
    raw = api_series(service, ["baseten_inference_requests_total"])
    starts = [vs["start_epoch_millis"] for vs in raw["metric_values"]]
    split = starts.index(T0 + PROMOTION_S * 1000)
    assert len(starts) == 121 and split == 61 and starts[60] == T0 + 1_800_000
    two_xx = [vs["values"][0][0] for vs in raw["metric_values"]]
    # the API: 30 requests in a full 30 s step, 15 in each 15 s half of the promotion's step
    assert two_xx[59] == 30 and two_xx[60] == 15 and two_xx[61] == 15 and two_xx[62] == 30
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    volume = next(g for g in graphs(page) if g["id"] == "inference-volume")
    assert volume["unit"] == "requests per 30 s"
    # drawn: 15 requests in 15 s scaled to the 30 s step = 30, so every point is 30 (1 request/s)
    x, drawn_2xx = drawn_data(page, "inference-volume")[:2]
    assert x == starts
    assert drawn_2xx == [30] * 121
    assert volume["ys"][0] == [30] * 121
    page.context.close()


def test_a_lone_point_between_gaps_is_drawn(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    lone = T0 + 300_000  # value set 10: [T0 + 300 s, T0 + 330 s), between the empty 9 and 11
    ys = drawn_data(page, "concurrent-requests")[1]
    assert [i for i, v in enumerate(ys) if v is not None] == [*range(9), 10, *range(12, 40)]
    assert ys[10] == 3
    assert line_pixels_in_column(page, "concurrent-requests", lone) > 0  # a dot where no line can be
    assert line_pixels_in_column(page, "concurrent-requests", T0 + 270_000) == 0  # the gaps stay empty
    assert line_pixels_in_column(page, "concurrent-requests", T0 + 330_000) == 0
    assert line_pixels_in_column(page, "concurrent-requests", T0 + 600_000) > 0  # the line
    page.context.close()


FORMAT_CASES = """async () => {
  const f = await import('/dashboard/js/format.js');
  const g = await import('/dashboard/js/graphs.js');
  const u = (name, kind, unit_hint, step) => f.unitOf({name, kind, unit_hint}, step);
  const cores = u('baseten_container_cpu_usage_seconds_total', 'COUNTER', 'RATIO');
  const sec = u('x_seconds', 'HISTOGRAM', 'SECONDS');
  const requests = u('baseten_inference_requests_total', 'COUNTER', 'COUNT', 30);
  const GiB = 1024 ** 3;
  return {
    nums: [f.num(0.003), f.num(0.00012), f.num(-0.004), f.num(1.5e-7), f.formatValue(0.003, cores)],
    ticks: [
      f.axisTicks([0, 0.001, 0.002, 0.003], cores, 0.001),
      f.axisTicks([0, 0.2, 0.4, 0.6], sec, 0.2),
      f.axisTicks([0, 0.5, 1, 1.5], sec, 0.5),
      f.axisTicks([0, GiB / 2, GiB, 1.5 * GiB], u('b', 'GAUGE', 'BYTES'), GiB / 2),
      f.axisTicks([0, 512, 1024], u('m', 'GAUGE', 'MEBIBYTES'), 512),
      f.axisTicks([0, 5000, 10000, 15000], requests, 5000),
      f.axisTicks([0, 0.25, 0.5], u('baseten_gpu_utilization', 'GAUGE', 'RATIO'), 0.25),
      f.axisTicks([0, 2.5, 5], u('baseten_x_requests', 'COUNTER', 'PER_SECOND'), 2.5),
      f.axisTicks([0, 50, 100], u('baseten_gpu_power_usage_watts', 'GAUGE', 'WATTS'), 50),
      f.axisTicks([0, 1e9, 2e9], u('baseten_gpu_sm_clock_hertz', 'GAUGE', 'PER_SECOND'), 1e9),
    ],
    hover: [
      f.formatValue(40.979, u('baseten_gpu_power_usage_watts', 'GAUGE', 'WATTS')),
      f.formatValue(2.31e9, u('baseten_gpu_sm_clock_hertz', 'GAUGE', 'PER_SECOND')),
    ],
    captions: [
      g.captionOf(sec, [0, 0.2, 0.4]), g.captionOf(sec, [0, 0.5, 1]), g.captionOf(requests, [0, 30]),
    ],
    times: [
      f.formatTime(Date.UTC(2026, 0, 1, 13, 30)),
      g.timeTick(Date.UTC(2026, 0, 1, 13, 30), 3600e3),
      g.timeTick(Date.UTC(2026, 0, 1, 13, 30), 7 * 86400e3),
    ],
  };
}"""


def test_numbers_units_and_times_read_right(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    got = page.evaluate(FORMAT_CASES)
    # a leading zero and no exponent: 2 significant digits below 0.01
    assert got["nums"] == ["0.003", "0.00012", "-0.004", "0.00000015", "0.003 cores"]
    # one unit per axis (the largest tick's), the decimals of the tick increment on every tick
    assert got["ticks"] == [
        ["0", "0.001 cores", "0.002 cores", "0.003 cores"],
        ["0", "200 ms", "400 ms", "600 ms"],  # every tick under 1 s: ms
        ["0", "0.5 s", "1.0 s", "1.5 s"],  # not "500 ms" beside "1 s"
        ["0", "0.5 GiB", "1.0 GiB", "1.5 GiB"],  # bytes / 1024^3
        ["0", "0.5 GiB", "1.0 GiB"],  # MiB / 1024
        ["0", "5 k", "10 k", "15 k"],  # not "5000" beside "10 k"
        ["0", "25 %", "50 %"],
        ["0", "2.5 req/s", "5.0 req/s"],
        ["0", "50 W", "100 W"],  # GPU power (unit hint WATTS)
        ["0", "1000 MHz", "2000 MHz"],  # the SM clock is stored in Hz, read in MHz
    ]
    assert got["hover"] == ["41 W", "2310 MHz"]
    assert got["captions"] == ["ms", "s", "requests per 30 s"]  # never "ms / s"
    assert got["times"] == ["2026-01-01 13:30:00", "13:30", "Jan 1 13:30"]  # 24-hour clock (UTC context)
    info = page.inner_text("#window-info")
    assert info == "2026-01-01 00:00:00 – 2026-01-01 01:00:00 · one point per 30 s"
    page.context.close()


def test_nearby_events_share_a_flag_with_their_count_and_hover_lists_each(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    page.click("#events-button")
    page.check("#events-show")
    graph = page.locator('section[data-panel="inference-volume"]')
    graph.locator(".event-cluster").first.wait_for()
    # a dashed line per event; one flag per cluster: the cluster of 4 and the lone autoscaling change
    kinds = graph.locator(".event-marker").evaluate_all("ms => ms.map(m => m.dataset.kind)")
    assert kinds == ["AUTOSCALING_CHANGED", "DEPLOYED", "PROMOTED", "ACTIVATED", "DEACTIVATED"]
    cluster = graph.locator(".event-cluster")
    assert cluster.count() == 1 and cluster.inner_text() == "4"
    assert graph.locator(".event-flag").count() == 2
    cluster.hover()
    page.wait_for_selector("#tooltip:not([hidden])")
    blocks = page.locator("#tooltip .tooltip-event")
    texts = [blocks.nth(i).inner_text().split("\n") for i in range(blocks.count())]
    assert [t[0] for t in texts] == ["Deployed", "Promoted", "Activated", "Deactivated"]  # every one
    assert texts[2] == ["Activated", "2026-01-01 00:30:20", "deployment: e2", "environment: none"]
    assert texts[3][1:3] == ["2026-01-01 00:30:30", "deployment: e1"]
    deployed, promoted = texts[0], texts[1]
    assert promoted[1:4] == ["2026-01-01 00:30:15", "deployment: e2", "environment: production"]
    assert "previous deployment: e1 (v1)" in promoted and "deployment name: v2" in promoted
    assert "instance type name: CPU" in deployed and "gpu count: 0" in deployed
    for text in (deployed, promoted):
        labels = [line.split(":")[0] for line in text[1:]]
        assert len(labels) == len(set(labels))  # each field once
        # the deployment and environment lines already say these; the name is the deployment name
        assert not {"deployment id", "previous deployment name", "name", "old", "new"} & set(labels)
    # the lone flag: its own event only
    graph.locator('.event-marker[data-kind="AUTOSCALING_CHANGED"] .event-flag').hover()
    page.wait_for_function("document.querySelectorAll('#tooltip .tooltip-event').length === 1")
    assert page.inner_text("#tooltip").split("\n") == [
        "Autoscaling changed",
        "2026-01-01 00:10:00",
        "deployment: e2",
        "environment: none",
        "min replica: 1 → 2",
    ]
    page.context.close()


def test_customize_view_scrolls_to_its_last_row_on_a_short_window(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    page.set_viewport_size({"width": 1000, "height": 380})  # a laptop window with the dev tools open
    wait_drawn(page)
    page.click("#customize-button")
    page.wait_for_selector("#customize[open]")
    box = page.evaluate(
        """() => { const d = document.getElementById('customize');
           const l = document.getElementById('customize-list');
           const close = document.getElementById('customize-close').getBoundingClientRect();
           return {overflow: getComputedStyle(l).overflowY,
                   listScroll: l.scrollHeight, listClient: l.clientHeight,
                   dialogScroll: d.scrollHeight, dialogClient: d.clientHeight,
                   dialogBottom: d.getBoundingClientRect().bottom, closeBottom: close.bottom,
                   rows: l.querySelectorAll('li[data-panel]').length, vh: innerHeight}; }"""
    )
    # the list scrolls inside the dialog; the dialog fits the window, its buttons in view
    assert box["overflow"] == "auto" and box["listScroll"] > box["listClient"]
    assert box["dialogScroll"] <= box["dialogClient"] and box["dialogBottom"] <= box["vh"] == 380
    assert box["closeBottom"] <= box["dialogBottom"]
    last = page.locator("#customize-list li[data-panel]").last
    page.mouse.move(500, 200)
    page.mouse.wheel(0, 5000)  # a wheel over the list scrolls it to its end
    page.wait_for_function(
        """() => { const l = document.getElementById('customize-list');
           const row = [...l.querySelectorAll('li[data-panel]')].pop().getBoundingClientRect();
           return row.bottom <= l.getBoundingClientRect().bottom + 1 && row.top >= 0; }"""
    )
    box_of_last = last.bounding_box()
    assert box_of_last is not None and box_of_last["y"] + box_of_last["height"] <= 380
    checkbox = last.locator("input[type=checkbox]")
    was = checkbox.is_checked()
    checkbox.click()  # reachable: toggles
    assert checkbox.is_checked() is not was
    page.context.close()


ASYNC_PANELS = {"time-in-async-queue", "async-queue-size", "webhook-requests", "webhook-latency"}


def test_no_desired_line_without_autoscaling_settings_and_no_async_graphs(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    drawn = {g["id"]: g for g in graphs(page)}
    replicas = drawn["replicas"]
    assert replicas["lines"] == ["Active"]  # no "Desired" (nor "Starting": no series of either)
    assert set(replicas["ys"][0]) == {2}  # 2 active in every step, across the promotion
    page.mouse.move(5, 5)
    names = page.locator('section[data-panel="replicas"] .u-legend .u-series .u-label').all_inner_texts()
    assert [n.strip() for n in names] == ["Time", "Active"]
    assert not ASYNC_PANELS & set(drawn)  # no async traffic: no async graph
    # Customize view lists them as having no data for this scope, hidden or not
    page.click("#customize-button")
    page.wait_for_selector("#customize[open]")
    for panel in ASYNC_PANELS:
        note = page.locator(f'#customize-list li[data-panel="{panel}"] .note').inner_text()
        assert note == "no data for this scope"
    page.context.close()


PARTIAL_CASES = """async () => {
  const s = await import('/dashboard/js/series.js');
  const metric = (name, kind, unit_hint) => ({name, kind, unit_hint});
  const count = metric('baseten_inference_requests_total', 'COUNTER', 'COUNT');
  const rate = metric('baseten_x_requests', 'COUNTER', 'PER_SECOND');
  const gauge = metric('baseten_replicas_active', 'GAUGE', 'COUNT');
  const panel = {lines: [count, rate, gauge].map((m) => ({metric: m, labels: {}, name: m.name}))};
  // a window from 10 s before a grid point to 10 s after the next: value sets of 10 s, 30 s, 10 s
  const answer = {
    start_epoch_millis: 20000, end_epoch_millis: 70000, step_seconds: 30,
    metric_descriptors: [count, rate, gauge].map((m) => ({...m, label_sets: [{}]})),
    metric_values: [20000, 30000, 60000].map((t) => ({start_epoch_millis: t, values: [[10], [1], [2]]})),
  };
  answer.metric_values[1].values = [[30], [1], [2]];
  return {lengths: s.valueSetLengths(answer), ys: s.panelData(panel, answer).ys};
}"""


def test_partial_first_and_last_steps_are_scaled_to_the_step(browser, service):
    page = open_page(browser, service, "/#/metrics?model=m3&scope=environment:production&range=1h")
    wait_drawn(page)
    got = page.evaluate(PARTIAL_CASES)
    assert got["lengths"] == [10_000, 30_000, 10_000]  # until the next start, the last until the end
    # 10 requests in 10 s = 30 per 30 s step; a per-second rate and a gauge are drawn as answered
    assert got["ys"] == [[30, 30, 30], [1, 1, 1], [2, 2, 2]]
    page.context.close()
