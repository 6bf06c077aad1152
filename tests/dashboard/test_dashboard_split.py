"""The "Split by" control of a graph (drill-down, issue 16 part 5) in headless Chromium against a pinned
service (clock and browser at T0 + 1 h, ``pinned_service.py``) holding model m5 ("wide"):

- deployment w1 serves production since 2025-12-31, with seven replicas r1 ... r7.
- ``baseten_inference_requests_total{status_code=200}`` per replica (as Knative's queue-proxy reports
  it): replica ri counts i requests every 15 s, so 2 i per 30 s step in every one of the 120 steps.
- ``baseten_gpu_utilization`` of ri's GPU 0: i / 10 every 10 s.

So split by replica, the 5 largest (r7 ... r3: 14, 12, 10, 8, 6 per step) are drawn and r1 + r2 = 6 is
"other (2)"; the 2xx lines add up to the unsplit 56. Split by GPU, "other (2, mean)" is (0.1 + 0.2) / 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser, Page

from servemetrics.store.memory import MemoryStore
from tests.apptools import org
from tests.dashboard.browser import graphs, launch, new_context, wait_drawn
from tests.dashboard.pinned_service import NOW, Pinned, pinned_service
from tests.query.helpers import series, store_with

pytestmark = pytest.mark.e2e
KEY = "sm-dashboard-split-key"
REPLICAS = range(1, 8)
VOLUME, GPU = "inference-volume", "gpu-usage"
STEPS = 120


def wide_store() -> MemoryStore:
    """The samples of the module docstring."""
    groups = []
    for i in REPLICAS:
        labels = {"model_id": "m5", "deployment_id": "w1", "replica": f"r{i}"}
        counts = [(s, i * (s + 60) // 15) for s in range(-60, 3601, 15)]
        groups.append(series("baseten_inference_requests_total", counts, **labels, status_code="200"))
        groups.append(
            series("baseten_gpu_utilization", [(s, i / 10) for s in range(-60, 3601, 10)], **labels, gpu="0")
        )
    return store_with(*groups)


def wide_declarations() -> dict:
    production = {"name": "production", "promotions": [{"deployment": "w1", "at": "2025-12-31T00:00:00Z"}]}
    model = {"id": "m5", "name": "wide", "organization": "acme", "deployments": [{"id": "w1"}]}
    return {
        "organizations": [org("acme", {KEY: "WORKSPACE_MANAGE_ALL"})],
        "models": [{**model, "environments": [production]}],
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Pinned]:
    with pinned_service(
        tmp_path_factory.mktemp("split"), store=wide_store(), decls=wide_declarations()
    ) as svc:
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def open_page(browser: Browser, service: Pinned) -> Page:
    page = new_context(browser, KEY).new_page()
    page.clock.set_fixed_time(datetime.fromtimestamp(NOW / 1000, UTC))
    page.goto(service.base + "/#/metrics?model=m5&scope=environment:production&range=1h")
    wait_drawn(page)
    return page


def graph(page: Page, panel: str) -> dict:
    return next(g for g in graphs(page) if g["id"] == panel)


def split(page: Page, panel: str, value: str, renders: int) -> dict:
    page.select_option(f'section[data-panel="{panel}"] select.split-by', value)
    wait_drawn(page, renders)
    return graph(page, panel)


def options(page: Page, panel: str) -> list[str]:
    return page.eval_on_selector_all(
        f'section[data-panel="{panel}"] select.split-by option', "os => os.map(o => o.textContent)"
    )


def test_split_by_replica_draws_the_top_five_and_other_adding_up(browser, service):
    page = open_page(browser, service)
    assert options(page, VOLUME) == ["None", "Replica", "Deployment", "Status code"]
    whole = graph(page, VOLUME)
    assert whole["lines"] == ["2xx", "4xx", "5xx"] and whole["ys"][0] == [56] * STEPS
    got = split(page, VOLUME, "replica", 2)
    parts = ["r7", "r6", "r5", "r4", "r3", "other (2)"]
    # 4xx and 5xx are 0 in every step for every replica: those lines are left out
    assert got["lines"] == [f"{p} 2xx" for p in parts]
    assert got["ys"] == [[v] * STEPS for v in (14, 12, 10, 8, 6, 6)]
    assert [sum(col) for col in zip(*got["ys"], strict=True)] == whole["ys"][0]
    back = split(page, VOLUME, "", 3)
    assert back["lines"] == ["2xx", "4xx", "5xx"] and back["ys"][0] == [56] * STEPS
    page.context.close()


def test_split_by_gpu_names_each_gpu_and_averages_the_rest(browser, service):
    page = open_page(browser, service)
    assert options(page, GPU) == ["None", "Replica", "GPU", "Deployment"]
    got = split(page, GPU, "gpu", 2)
    assert got["lines"] == [f"r{i} GPU 0" for i in (7, 6, 5, 4, 3)] + ["other (2, mean)"]
    for ys, want in zip(got["ys"], (0.7, 0.6, 0.5, 0.4, 0.3, 0.15), strict=True):
        assert ys == pytest.approx([want] * STEPS)
    assert graph(page, VOLUME)["lines"] == ["2xx", "4xx", "5xx"]  # the other graphs stay unsplit
    page.context.close()


def show(page: Page, panel: str, value: str, renders: int) -> dict:
    page.select_option(f'section[data-panel="{panel}"] select.show-as', value)
    wait_drawn(page, renders)
    return graph(page, panel)


def test_a_counted_graph_shows_a_running_total_and_back(browser, service):
    """Requests are counted per step (56 a step), so "Running total" draws 56, 112, ... 56 x 120 = 6,720 at
    the window's end (the window's SUMMARY); a gauge's graph (GPU usage) offers no such choice. Restarts are
    counted the same way (a COUNT counter) and get the same control."""
    page = open_page(browser, service)
    assert graph(page, VOLUME)["unit"] == "requests per 30 s"
    assert page.locator(f'section[data-panel="{GPU}"] select.show-as').count() == 0
    total = show(page, VOLUME, "total", 2)
    assert total["unit"] == "requests in total"
    assert total["ys"][0] == [56 * (i + 1) for i in range(STEPS)] and total["ys"][0][-1] == 6720
    assert total["ys"][1] == [0] * STEPS  # 4xx: none, a flat 0, not a gap
    split_total = split(page, VOLUME, "replica", 3)
    assert [ys[-1] for ys in split_total["ys"]] == [v * STEPS for v in (14, 12, 10, 8, 6, 6)]
    split(page, VOLUME, "", 4)
    back = show(page, VOLUME, "", 5)
    assert back["unit"] == "requests per 30 s" and back["ys"][0] == [56] * STEPS
    page.context.close()
