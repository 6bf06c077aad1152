"""Wheel build hook: put the dashboard's uPlot into the package, so ``pip install`` of the repository (or of
a wheel built from it) serves a working dashboard without ``scripts/install``.

The files (``uPlot.iife.min.js``, ``uPlot.min.css``) go to ``servemetrics/dashboard/static/vendor/``
(gitignored; listed as wheel artifacts in pyproject.toml). They are taken, in this order, from that
directory when ``scripts/install`` already filled it, from ``web/node_modules/uplot/dist`` after an
``npm ci``, or from the npm registry's tarball of the version ``web/package-lock.json`` pins, checked
against the lockfile's sha512 integrity (a mismatch or no network fails the build with a message saying
what to do). No npm is needed for the last route.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FILES = ("uPlot.iife.min.js", "uPlot.min.css")
VENDOR = Path("servemetrics/dashboard/static/vendor")
REGISTRY = os.environ.get("npm_config_registry", "https://registry.npmjs.org/").rstrip("/")


def _pinned(root: Path) -> tuple[str, str]:
    """uPlot's version and sha512 integrity (base64) from ``web/package-lock.json``."""
    lock = json.loads((root / "web/package-lock.json").read_text())
    entry = lock["packages"]["node_modules/uplot"]
    algorithm, _, digest = entry["integrity"].partition("-")
    if algorithm != "sha512":
        raise RuntimeError(f"web/package-lock.json: uplot's integrity is {algorithm}, expected sha512")
    return entry["version"], digest


def _download(version: str, digest: str) -> dict[str, bytes]:
    url = f"{REGISTRY}/uplot/-/uplot-{version}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - the npm registry
            data = resp.read()
    except OSError as exc:
        raise RuntimeError(
            f"cannot fetch the dashboard's uPlot from {url} ({exc}); run `bash scripts/install` first "
            "(npm ci in web/), or build where the npm registry is reachable"
        ) from exc
    if base64.b64encode(hashlib.sha512(data).digest()).decode() != digest:
        raise RuntimeError(f"{url} does not match web/package-lock.json's sha512; not packaging it")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        out = {}
        for name in FILES:
            member = tar.extractfile(f"package/dist/{name}")
            if member is None:
                raise RuntimeError(f"{url} has no dist/{name}")
            out[name] = member.read()
    return out


def ensure_vendor(root: Path) -> Path:
    """The vendor directory under ``root`` with both files (copied or downloaded when missing)."""
    vendor = root / VENDOR
    if all((vendor / n).is_file() for n in FILES):
        return vendor
    vendor.mkdir(parents=True, exist_ok=True)
    dist = root / "web/node_modules/uplot/dist"
    if all((dist / n).is_file() for n in FILES):
        for name in FILES:
            shutil.copy(dist / name, vendor / name)
        return vendor
    for name, data in _download(*_pinned(root)).items():
        (vendor / name).write_bytes(data)
    return vendor


class VendorHook(BuildHookInterface):  # type: ignore[type-arg]
    """Hatch's ``custom`` build hook (pyproject.toml ``[tool.hatch.build.targets.wheel.hooks.custom]``)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        ensure_vendor(Path(self.root))
