"""The Startup time card in headless Chromium against the pinned service (``pinned_service.py``; clock
and browser at T0 + 1 h): the summary of the window's startups and the slowest ones, from attempts
written to the registry at hand-picked times in "Last 1 hour" of d1 (``production``):

- r1 registered T0 + 100 s, healthy + 103 s: READINESS 3 s, SUCCESS in 3 s;
- pod p1 created T0 + 500 s, scheduled + 502 s, containers + 520 s, ready + 530 s: SCHEDULING 2 s,
  CONTAINER_CREATE 18 s, READINESS 10 s, SUCCESS in 30 s;
- r3 registered T0 + 300 s, FAILED + 301 s: FAILED in 1 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser

from tests.dashboard.browser import launch, new_context
from tests.dashboard.pinned_service import KEY, NOW, T0, Pinned, pinned_service

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Pinned]:
    with pinned_service(tmp_path_factory.mktemp("startups")) as svc:
        registry = svc.app.state.service.registry
        registry.deployments.register_replica("m1", "d1", "r1", [], at_ms=T0 + 100_000)
        registry.startups.healthy("d1", "r1", at_ms=T0 + 103_000)
        marks = {"created": 500, "scheduled": 502, "containers_started": 520, "ready": 530}
        registry.startups.record_pod("d1", "p1", "uid-p1", {k: T0 + v * 1000 for k, v in marks.items()}, None)
        registry.deployments.register_replica("m1", "d1", "r3", [], at_ms=T0 + 300_000)
        registry.deployments.set_replica_status("m1", "d1", "r3", "FAILED", "crashed", at_ms=T0 + 301_000)
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as b:
        yield b


def _rows(page, caption: str) -> list[list[str]]:
    table = page.locator("#startup-card table", has=page.locator("caption", has_text=caption))
    return table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def test_the_card_shows_the_summary_and_the_slowest_startups(browser: Browser, service: Pinned) -> None:
    page = new_context(browser, KEY).new_page()
    page.clock.set_fixed_time(datetime.fromtimestamp(NOW / 1000, UTC))
    page.goto(service.base + "/")
    page.wait_for_selector("#startup-card[data-render-state=done]", timeout=30_000)
    # successes 3 s and 30 s: mean 16.5 s, p50 the 1st of 2, p90..p99 the 2nd; READINESS 3 s and 10 s
    assert _rows(page, "Startup time") == [
        ["Whole startup", "2", "16.5s", "3s", "30s", "30s", "30s"],
        ["Scheduling", "1", "2s", "2s", "2s", "2s", "2s"],
        ["Container create", "1", "18s", "18s", "18s", "18s", "18s"],
        ["Readiness", "2", "6.5s", "3s", "10s", "10s", "10s"],
    ]
    slowest = _rows(page, "Slowest startups (3 in the window)")
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in slowest] == [
        ("p1", "v1", "SUCCESS", "30s", "Scheduling 2s, Container create 18s, Readiness 10s"),
        ("r1", "v1", "SUCCESS", "3s", "Readiness 3s"),
        ("r3", "v1", "FAILED", "1s", "Readiness failed"),
    ]
