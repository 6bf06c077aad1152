"""The dashboard in headless Chromium against a pinned service (``pinned_service.py``: clock and browser
at T0 + 1 h, hand-made data): gaps for null, "≥ bound", units and the synced crosshair, the API's 400
text for a custom range over 7 days, the GPU usage page, and a revoked or unknown key.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import delete

from servemetrics.registry import tables
from tests.dashboard.browser import graphs, launch, line_pixels_in_column, new_context, screenshot, wait_drawn
from tests.dashboard.pinned_service import GAP_STEP, KEY, NOW, REVOCABLE_KEY, T0, Pinned, pinned_service

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Pinned]:
    with pinned_service(tmp_path_factory.mktemp("pinned")) as svc:
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_page(browser: Browser, service: Pinned, key: str | None = KEY, path: str = "/") -> Page:
    page = new_context(browser, key).new_page()
    page.clock.set_fixed_time(datetime.fromtimestamp(NOW / 1000, UTC))
    page.goto(service.base + path)
    return page


def hover_at(page: Page, panel: str, x_ms: int) -> None:
    """Move the mouse over ``panel``'s plot at time ``x_ms``, half way up."""
    box = page.evaluate(
        """([id, x]) => { const u = window.smDashboard.metrics.uplot(id);
           const r = u.over.getBoundingClientRect();
           return {x: r.left + u.valToPos(x, 'x'), y: r.top + r.height / 2}; }""",
        [panel, x_ms],
    )
    page.mouse.move(box["x"], box["y"])


def legend(page: Page, panel: str) -> dict[str, str]:
    """``{line name: shown value}`` of ``panel``'s live legend."""
    rows = page.locator(f'section[data-panel="{panel}"] .u-legend .u-series')
    out = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        out[row.locator(".u-label").inner_text().strip()] = row.locator(".u-value").inner_text().strip()
    return out


def test_a_null_step_is_a_gap_not_a_zero(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    replicas = next(g for g in graphs(page) if g["id"] == "replicas")
    active = replicas["ys"][0]
    # value sets start at T0 + 30 s * k; no replicas sample in [T0 + 1800 s, T0 + 1830 s) -> step 60 null
    assert replicas["x"][GAP_STEP] == T0 + 1_800_000
    assert active[GAP_STEP] is None
    assert active[GAP_STEP - 1] == 2 and active[GAP_STEP + 1] == 2
    assert replicas["nonNull"] == [119]  # 120 steps in the hour, one of them empty
    # drawn: no line in the column of the empty step, a line in the column of a full one
    assert line_pixels_in_column(page, "replicas", T0 + 1_800_000) == 0
    assert line_pixels_in_column(page, "replicas", T0 + 900_000) > 0
    hover_at(page, "replicas", T0 + 1_800_000)
    assert legend(page, "replicas")["Active"] == "—"
    hover_at(page, "replicas", T0 + 900_000)
    assert legend(page, "replicas")["Active"] == "2"
    page.context.close()


def test_crosshair_shows_values_with_units_and_at_least_bound(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    units = {g["id"]: g["unit"] for g in graphs(page)}
    assert units["inference-volume"] == "requests per 30 s"  # COUNT counter: requests per 30 s step
    assert units["end-to-end-response-time"] == "s"  # its axis' one unit: ticks up to 1 s and above
    at_step_30 = T0 + 30 * 30_000
    hover_at(page, "end-to-end-response-time", at_step_30)
    # per step: le=0.1 +40, le=0.5 +80, le=1.0 +85, +Inf +100 (count 100), sum +60
    # p50: rank 50 in (0.1, 0.5]: 0.1 + (50 - 40) / (80 - 40) * 0.4 = 0.2 s -> "200 ms"
    # p90, p95, p99: rank > 85 lies in +Inf -> the highest finite bound 1.0 s -> "≥ 1 s"
    # avg: 60 / 100 = 0.6 s -> "600 ms"
    assert legend(page, "end-to-end-response-time") == {
        "Time": "2026-01-01 00:15:00",
        "p50": "200 ms",
        "p90": "≥ 1 s",
        "p95": "≥ 1 s",
        "p99": "≥ 1 s",
        "avg": "600 ms",
    }
    # the crosshair is synced: every other graph shows its value at the same instant
    assert legend(page, "inference-volume") == {
        "Time": "2026-01-01 00:15:00",
        "2xx": "30",
        "4xx": "0",
        "5xx": "0",
    }
    assert legend(page, "replicas")["Active"] == "2"
    assert legend(page, "gpu-memory")["GPU memory"] == "2 GiB"  # 2048 MiB = 2 GiB
    assert legend(page, "gpu-usage")["GPU usage"] == "50 %"  # ratio 0.5
    page.context.close()


def test_custom_range_over_seven_days_shows_the_api_message(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    page.select_option("#range", "custom")
    page.fill("#custom-start", "2025-12-20T00:00")  # the context's time zone is UTC
    page.fill("#custom-end", "2026-01-01T01:00")
    page.click("#custom-apply")
    page.wait_for_selector("#error:not([hidden])")
    start, end = 1_766_188_800_000, T0 + 3_600_000  # 2025-12-20T00:00Z; 12 days + 1 h later
    api = httpx.get(
        f"{service.base}/v1/models/m1/environments/production/metrics",
        params={"mode": "SERIES", "start_epoch_millis": start, "end_epoch_millis": end},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert api.status_code == 400
    assert page.inner_text("#error") == f"The API answered: {api.json()['error']}"
    page.context.close()


def test_gpu_usage_page_groups_filters_and_resets(browser, service):
    page = open_page(browser, service, path="/#/gpu-usage")
    page.wait_for_selector("#gpu-graph[data-render-state=done]")

    def shown() -> list[str]:
        return page.evaluate("window.smDashboard.gpu.inspect().groups")

    assert shown() == ["H100", "L4"]  # d1: 2 replicas x 2 H100 = 4 GPUs; x1: 1 replica x 1 L4 = 1 GPU
    box = page.evaluate(
        "(() => { const r = document.querySelector('#gpu-graph .u-over').getBoundingClientRect();"
        " return {x: r.left + r.width / 4, y: r.top + r.height / 2}; })()"  # 00:15, not the gap
    )
    page.mouse.move(box["x"], box["y"])
    values = page.locator("#gpu-graph .u-legend .u-series .u-value").all_inner_texts()
    assert values[1:] == ["4 GPUs", "1 GPU"]
    screenshot(page, "gpu-usage.png")
    page.check("#gpu-type-L4")
    page.wait_for_function("window.smDashboard.gpu.inspect().groups.join() === 'L4'")
    page.click("#gpu-reset")
    page.wait_for_function("window.smDashboard.gpu.inspect().groups.join() === 'H100,L4'")
    assert not page.is_checked("#gpu-type-L4")
    page.select_option("#gpu-group", "model")
    page.wait_for_function("window.smDashboard.gpu.inspect().group_by === 'model'")
    assert sorted(shown()) == ["llama", "whisper"]
    page.context.close()


def test_unknown_key_and_revoked_key_show_the_sign_in_again(browser, service):
    page = open_page(browser, service, key="sm-no-such-key")
    page.wait_for_selector("#signin:not([hidden])")
    message = page.inner_text("#signin-message")
    assert message.startswith("Your API key was not accepted") and "invalid API key" in message
    page.fill("#signin-key", REVOCABLE_KEY)
    page.click("#signin button[type=submit]")
    wait_drawn(page)
    assert page.is_hidden("#signin")
    with service.app.state.service.registry.engine.begin() as conn:  # revoke it: the only export key
        conn.execute(delete(tables.api_keys).where(tables.api_keys.c.type == "WORKSPACE_EXPORT_METRICS"))
    page.click("#refresh")
    page.wait_for_selector("#signin:not([hidden])")
    assert "invalid API key" in page.inner_text("#signin-message")
    assert page.evaluate("localStorage.getItem('servemetrics.apiKey')") is None
    page.context.close()


def test_ranges_ending_now_refresh_every_30_s_custom_ranges_do_not(browser, service):
    page = new_context(browser, KEY).new_page()
    page.clock.install(time=datetime.fromtimestamp(NOW / 1000, UTC))  # timers run only when told to
    ends: list[int] = []

    def record(request) -> None:
        if "/metrics?" in request.url:
            query = dict(p.split("=", 1) for p in request.url.split("?", 1)[1].split("&"))
            ends.append(int(query["end_epoch_millis"]))

    page.on("request", record)
    page.goto(service.base + "/")
    wait_drawn(page)
    # one SERIES call of the visible metrics, ending "now" (the fake clock moves with real time)
    assert len(ends) == 1 and NOW <= ends[0] < NOW + 10_000
    assert page.is_checked("#autorefresh") and page.is_enabled("#autorefresh")
    page.clock.run_for(30_000)
    wait_drawn(page, renders=2)
    assert len(ends) == 2
    assert 30_000 <= ends[1] - ends[0] < 40_000  # the window moved on with the clock
    page.select_option("#range", "custom")
    page.fill("#custom-start", "2026-01-01T00:00")
    page.fill("#custom-end", "2026-01-01T00:30")
    page.click("#custom-apply")
    wait_drawn(page, renders=3)
    assert page.is_disabled("#autorefresh")
    page.clock.run_for(60_000)
    assert len(ends) == 3  # one call for the custom range, none after
    page.context.close()


def test_the_last_15_minutes_preset_asks_for_15_minutes_ending_now(browser, service):
    """The shortest preset (a new user looking at a load test that just started found 1 hour the
    shortest): its SERIES call spans 15 minutes ending at the browser's now."""
    page = open_page(browser, service)
    wait_drawn(page)
    windows: list[tuple[int, int]] = []

    def record(request) -> None:
        if "/metrics?" in request.url:
            query = dict(p.split("=", 1) for p in request.url.split("?", 1)[1].split("&"))
            windows.append((int(query["start_epoch_millis"]), int(query["end_epoch_millis"])))

    page.on("request", record)
    page.select_option("#range", "15m")
    wait_drawn(page, renders=2)
    assert windows == [(NOW - 15 * 60_000, NOW)]
    assert "range=15m" in page.url
    page.context.close()


FORMAT_CASES = """async () => {
  const f = await import('/dashboard/js/format.js');
  const ev = await import('/dashboard/js/events.js');
  const u = (name, kind, unit_hint, step) => f.unitOf({name, kind, unit_hint}, step);
  const sec = u('x_seconds', 'HISTOGRAM', 'SECONDS');
  return {
    values: [
      f.formatValue(0.0853, sec), f.formatValue(1.25, sec), f.formatValue(null, sec),
      f.formatValue(1536, u('b', 'GAUGE', 'BYTES')), f.formatValue(2048, u('m', 'GAUGE', 'MEBIBYTES')),
      f.formatValue(0.123, u('baseten_gpu_utilization', 'GAUGE', 'RATIO')),
      f.formatValue(0.5, u('baseten_container_cpu_usage_seconds_total', 'COUNTER', 'RATIO')),
      f.formatValue(45.5, u('baseten_gpu_temperature_celsius', 'GAUGE', 'COUNT')),
      f.formatValue(12.5, u('baseten_x_requests', 'COUNTER', 'PER_SECOND')),
      f.formatValue(1234567, u('baseten_inference_requests_total', 'COUNTER', 'COUNT', 300)),
    ],
    labels: [
      u('baseten_inference_requests_total', 'COUNTER', 'COUNT', 300).label,
      u('baseten_container_restarts_total', 'COUNTER', 'COUNT', 1800).label,
      u('baseten_replicas_active', 'GAUGE', 'COUNT', 30).label,
      f.labelSetName({quantile: '0.95'}), f.labelSetName({status: '5xx'}), f.labelSetName({stat: 'avg'}),
    ],
    details: ev.detailLines({old: {min_replica: 1, max_replica: 6}, new: {min_replica: 2, max_replica: 6}}),
    status: ev.detailLines({old_status: 'ACTIVE', new_status: 'INACTIVE'}),
  };
}"""


def test_units_labels_and_event_details_as_shown(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    got = page.evaluate(FORMAT_CASES)
    assert got["values"] == [
        "85.3 ms",  # 0.0853 s * 1000
        "1.25 s",
        "—",  # null
        "1.5 KiB",  # 1536 / 1024
        "2 GiB",  # 2048 MiB / 1024
        "12.3 %",  # ratio 0.123 * 100
        "0.5 cores",  # CPU-seconds per second
        "45.5 °C",
        "12.5 req/s",
        "1.23 M",  # 1,234,567 / 1e6, 3 significant digits
    ]
    assert got["labels"] == ["requests per 5 min", "restarts per 30 min", "replicas", "p95", "5xx", "avg"]
    assert got["details"] == ["min replica: 1 → 2"]  # max_replica unchanged: not listed
    assert got["status"] == ["status: ACTIVE → INACTIVE"]
    page.context.close()


def test_a_scope_without_data_says_so(browser, service):
    page = open_page(browser, service)
    wait_drawn(page)
    page.select_option("#scope", "deployment:d2")  # d2 never reported a sample
    page.wait_for_function("document.getElementById('graphs').dataset.renderState === 'empty'")
    assert page.inner_text("#status") == "No data for this scope in this time range."
    assert page.locator("#graphs section.graph").count() == 0
    assert page.is_hidden("#error")
    page.context.close()


AXIS_FITS = """() => [...document.querySelectorAll('#graphs section.graph')].map((sec) => {
  const u = window.smDashboard.metrics.uplot(sec.dataset.panel);
  const edge = u.ctx.getImageData(0, 0, 2, u.ctx.canvas.height).data;  // the canvas' first 2 columns
  let inked = 0;
  for (let i = 3; i < edge.length; i += 4) if (edge[i] > 0) inked++;
  return [sec.dataset.panel, u.axes[1]._values.join(' | '), inked];
})"""


def test_no_y_axis_tick_text_is_cut_at_the_left_edge(browser, service):
    """Each y axis is as wide as its longest tick text (a fixed 78 px cut "0.002 cores" to ".002 cores")."""
    page = open_page(browser, service)
    wait_drawn(page)
    fits = page.evaluate(AXIS_FITS)
    assert len(fits) > 5 and [f for f in fits if f[2]] == [], fits  # no ink in the first 2 px columns
    # long tick texts (a tiny throughput: "0.00030 tok/s") widen the axis instead of running off the edge
    page.evaluate(
        "() => { const u = window.smDashboard.metrics.uplot('vllm-output-token-throughput');"
        " u.setScale('y', {min: 0, max: 0.0003}); }"
    )
    [got] = [f for f in page.evaluate(AXIS_FITS) if f[0] == "vllm-output-token-throughput"]
    assert "0.0003" in got[1] and got[2] == 0, got
    page.context.close()
