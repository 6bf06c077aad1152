"""The dashboard (docs/dashboard.md): the static page at ``/`` and its assets under ``/dashboard/``.

The page is plain HTML, CSS and ES modules in ``servemetrics/dashboard/`` (no build step); uPlot comes
from the npm registry, pinned in ``web/package-lock.json`` and copied by ``scripts/install`` into
``servemetrics/dashboard/static/vendor/``. The page reads the public API with the user's key; these routes
need none. The organization GPU usage page is the hash route ``/#/gpu-usage`` of the same page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from servemetrics.api.errors import ApiError, not_found

router = APIRouter(include_in_schema=False)

DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "dashboard"
"""``servemetrics/dashboard/``: ``index.html`` and ``static/``."""
STATIC_DIR = DASHBOARD_DIR / "static"
VENDOR_FILES = ("vendor/uPlot.iife.min.js", "vendor/uPlot.min.css")
"""Files ``scripts/install`` copies from ``web/node_modules/uplot/dist/`` (gitignored, in the wheel)."""
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_NO_CACHE = {"Cache-Control": "no-cache"}


def missing_vendor_files(static_dir: Path) -> list[str]:
    """The vendored files (paths relative to ``static_dir``) that are not there; [] when installed."""
    return [name for name in VENDOR_FILES if not (static_dir / name).is_file()]


def _require_vendor() -> None:
    missing = missing_vendor_files(STATIC_DIR)
    if missing:
        raise ApiError(
            503,
            f"the dashboard's chart library is not installed ({', '.join(missing)} missing under "
            f"{STATIC_DIR}); run `bash scripts/install` (npm ci in web/ copies uPlot there), then reload",
        )


@router.get("/")
def dashboard_page() -> FileResponse:
    """The dashboard page; 503 ``{"error"}`` saying to run ``scripts/install`` when uPlot is missing."""
    _require_vendor()
    return FileResponse(DASHBOARD_DIR / "index.html", media_type=_TYPES[".html"], headers=_NO_CACHE)


@router.get("/gpu-usage")
def gpu_usage_page() -> RedirectResponse:
    """The organization GPU usage page lives at the hash route ``/#/gpu-usage``."""
    return RedirectResponse("/#/gpu-usage", status_code=307)


def _asset_index(static_dir: Path) -> dict[str, Path]:
    """Every file shipped under ``static_dir`` by its ``/``-separated relative path, plus the vendored
    files by name (they may be installed after start-up). Requests are looked up here, so no part of a
    request path ever reaches the filesystem (no ``..``, NUL bytes or over-long names to handle)."""
    index = {p.relative_to(static_dir).as_posix(): p for p in static_dir.rglob("*") if p.is_file()}
    index.update({name: static_dir / name for name in VENDOR_FILES})
    return index


_ASSETS = _asset_index(STATIC_DIR)


@router.get("/dashboard/{path:path}")
def dashboard_asset(path: str) -> FileResponse:
    """A file under ``servemetrics/dashboard/static/``; 404 ``{"error"}`` for anything else (no ``..``,
    no listing); 503 for a vendored file that ``scripts/install`` has not copied yet."""
    target = _ASSETS.get(path)
    if target is None:
        raise not_found(f"no dashboard file {path[:100]!r}")
    if path in VENDOR_FILES:
        _require_vendor()
    media_type = _TYPES.get(target.suffix, "application/octet-stream")
    return FileResponse(target, media_type=media_type, headers=_NO_CACHE)
