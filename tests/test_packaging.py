"""``pip install`` the Python way (issue 15): a wheel built from the repository's files alone (no
``scripts/install``, no ``web/node_modules``) carries the dashboard's uPlot (``hatch_build.py`` fetches
the tarball ``web/package-lock.json`` pins and checks its sha512), and ``servemetrics serve`` run from
that wheel serves the dashboard with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT
from tests.processes import free_port, stop, wait_http, write_service_config

pytestmark = pytest.mark.e2e
VENDOR = "servemetrics/dashboard/static/vendor"
FILES = ("uPlot.iife.min.js", "uPlot.min.css")


def _source_copy(dest: Path) -> Path:
    """The repository's files as a clone has them (tracked and not ignored), without any vendored file."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO_ROOT, check=True, capture_output=True
    ).stdout.decode()
    for name in names.splitlines():
        if (REPO_ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO_ROOT / name, dest / name)
    assert not (dest / VENDOR).exists() and not (dest / "web/node_modules").exists()
    return dest


def test_a_wheel_built_from_the_repository_serves_the_dashboard(tmp_path):
    src = _source_copy(tmp_path / "src")
    out = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_config")}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        capture_output=True,
        env=env,
    )
    assert build.returncode == 0, build.stderr.decode()[-3000:]
    [wheel] = out.glob("servemetrics-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        for name in FILES:
            # the same bytes as `npm ci` put in web/node_modules (scripts/install ran before the tests)
            assert (
                zf.read(f"{VENDOR}/{name}") == (REPO_ROOT / "web/node_modules/uplot/dist" / name).read_bytes()
            )
        zf.extractall(site)

    port = free_port()
    write_service_config(
        tmp_path, port, [{"name": "acme", "api_keys": [{"key": "k", "type": "PERSONAL"}]}], []
    )
    log = open(tmp_path / "serve.log", "wb")
    serve = subprocess.Popen(
        [sys.executable, "-m", "servemetrics", "serve", "--config", str(tmp_path / "servemetrics.yaml")],
        cwd=tmp_path,  # not the repository: servemetrics is imported from the wheel's files
        env={**os.environ, "PYTHONPATH": str(site)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/healthz", 60)
        where = subprocess.run(
            [sys.executable, "-c", "import servemetrics; print(servemetrics.__file__)"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(site)},
            capture_output=True,
            check=True,
        ).stdout.decode()
        assert where.startswith(str(site)), where
        assert httpx.get(f"{base}/").status_code == 200
        js = httpx.get(f"{base}/dashboard/vendor/uPlot.iife.min.js")
        assert js.status_code == 200 and js.content == (site / VENDOR / FILES[0]).read_bytes()
    finally:
        stop(serve)
        log.close()
