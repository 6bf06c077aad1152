"""The dashboard's routes in process: the page, its assets, no path escapes, and the 503 that says to run
scripts/install when uPlot was not copied in."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.app import create_app
from servemetrics.api.routes import dashboard
from servemetrics.config import parse_config


@pytest.fixture
def client(tmp_path):
    app = create_app(parse_config({"data_dir": str(tmp_path)}), scrape=False, gateway=False)
    with TestClient(app) as c:
        yield c


def test_page_and_assets_need_no_key(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="/dashboard/js/main.js">' in page.text
    js = client.get("/dashboard/js/main.js")
    assert js.status_code == 200 and js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert client.get("/dashboard/vendor/uPlot.iife.min.js").status_code == 200
    assert client.get("/gpu-usage", follow_redirects=False).headers["location"] == "/#/gpu-usage"


def test_no_file_outside_the_static_directory(client):
    assert client.get("/dashboard/../routes/dashboard.py").status_code == 404  # the client normalises it
    for path in ("/dashboard/%2e%2e/%2e%2e/api/app.py", "/dashboard/..%2f..%2fapi%2fapp.py", "/dashboard/js"):
        resp = client.get(path)
        assert resp.status_code == 404, path
        assert "no dashboard file" in resp.json()["error"], path


def test_missing_uplot_is_a_503_saying_to_run_install(client, tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "STATIC_DIR", tmp_path)
    assert dashboard.missing_vendor_files(tmp_path) == ["vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"]
    resp = client.get("/")
    assert resp.status_code == 503
    assert "run `bash scripts/install`" in resp.json()["error"]
    assert client.get("/dashboard/vendor/uPlot.min.css").status_code == 503


def test_odd_asset_paths_are_404_not_500(client):
    # found by a bad-input pass: a NUL byte reached Path.resolve() (ValueError) and a 300-character name
    # reached is_file() (OSError ENAMETOOLONG), both answered as plain-text 500s
    long_segments = "/".join("b" * 200 for _ in range(30))
    for path in (
        "/dashboard/%00",
        "/dashboard/a%00b.js",
        "/dashboard/" + "a" * 300,
        "/dashboard/" + long_segments,
    ):
        resp = client.get(path)
        assert resp.status_code == 404, path[:40]
        assert resp.json()["error"].startswith("no dashboard file "), path[:40]
        assert len(resp.json()["error"]) < 140, path[:40]  # the echoed path is cut at 100 characters
