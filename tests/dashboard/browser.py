"""Playwright on Debian's chromium (never a downloaded browser), and what the tests read from the page.

``launch`` starts ``/usr/bin/chromium`` headless with the flags that keep it off the network; ``open_page``
gives a page with the API key already in localStorage; ``wait_drawn`` waits for the dashboard's
"every visible graph has drawn" flag (``#graphs[data-render-state=done]``, docs/dashboard.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.conftest import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "artifacts"
KEY_STORAGE = "servemetrics.apiKey"


@contextmanager
def launch() -> Iterator[Browser]:
    """Headless Debian chromium; fails saying to run scripts/install when it or uPlot is missing."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: run `bash scripts/install` (as root it installs Debian's chromium)"
        )
    vendor = REPO_ROOT / "servemetrics" / "dashboard" / "static" / "vendor" / "uPlot.iife.min.js"
    if not vendor.exists():
        pytest.fail(f"{vendor} is missing: run `bash scripts/install` (npm ci in web/ copies uPlot there)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def new_context(browser: Browser, key: str | None) -> BrowserContext:
    """A fresh profile (UTC, 1400x1000) with ``key`` stored as the dashboard's API key."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, timezone_id="UTC")
    if key is not None:
        context.add_init_script(
            f"if (!sessionStorage.getItem('sm-test-init')) {{ sessionStorage.setItem('sm-test-init', '1');"
            f" localStorage.setItem({KEY_STORAGE!r}, JSON.stringify({key!r})); }}"
        )
    return context


def wait_drawn(page: Page, renders: int = 1, timeout_ms: float = 30_000, graphs_id: str = "graphs") -> None:
    """Until the page has finished its ``renders``-th complete render of the graphs in ``#graphs_id``
    (``graphs``: the Metrics tab's; ``mapi-graphs``: the Model APIs tab's)."""
    page.wait_for_function(
        "([id, n]) => { const g = document.getElementById(id);"
        " return g.dataset.renderState === 'done' && Number(g.dataset.renders || 0) >= n; }",
        arg=[graphs_id, renders],
        timeout=timeout_ms,
    )


def graphs(page: Page) -> list[dict]:
    """``[{id, title, unit, lines, x, ys, nonNull}]`` of the drawn graphs, in page order."""
    return page.evaluate("window.smDashboard.metrics.inspect()")


def screenshot(page: Page, name: str) -> Path:
    """Full-page PNG in ``artifacts/`` (gitignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


BLUE = (0x25, 0x63, 0xEB)
"""graphs.js PALETTE[0]: a panel's first line."""


def line_pixels_in_column(page: Page, panel: str, x_ms: int, rgb: tuple[int, int, int] = BLUE) -> int:
    """Pixels of colour ``rgb`` (exact or anti-aliased) in ``panel``'s canvas column at ``x_ms``."""
    return int(
        page.evaluate(
            """([id, x, rgb]) => { const u = window.smDashboard.metrics.uplot(id);
               const cx = Math.round(u.valToPos(x, 'x', true));
               const d = u.ctx.getImageData(cx, u.bbox.top, 1, u.bbox.height).data; let n = 0;
               for (let i = 0; i < d.length; i += 4) {
                 const far = Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1])
                   + Math.abs(d[i + 2] - rgb[2]);
                 if (d[i + 3] > 0 && far < 90) n++; }
               return n; }""",
            [panel, x_ms, list(rgb)],
        )
    )
