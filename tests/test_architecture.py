"""Imports point one way (DESIGN "Data flow"): no layer imports one above it, and every top-level
module of the package is listed here with what it may import (a new one fails until it is placed)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PKG = REPO_ROOT / "servemetrics"
BOTTOM = {"types", "timeutil", "labels", "samples", "keyed_loops", "leb128"}
"""Contracts every layer may use: aliases, time helpers, the label contract, the sample unit,
``KeyedLoops`` (a task per key) and varints (``leb128``)."""
ALLOWED: dict[str, set[str]] = {
    "__init__": {"samples", "types"},
    "types": set(),
    "timeutil": set(),
    "labels": {"types"},
    "samples": {"types"},
    "keyed_loops": set(),
    "leb128": set(),
    "remote_write": {*BOTTOM},
    "catalog": {*BOTTOM},
    "selfmetrics": set(),
    "netpolicy": set(),
    "ingest": {*BOTTOM, "catalog", "selfmetrics"},
    "store": {*BOTTOM, "remote_write", "catalog"},
    "registry": {*BOTTOM},
    "query": {*BOTTOM, "catalog", "store"},
    "gateway": {*BOTTOM, "catalog", "registry", "netpolicy"},
    "config": {*BOTTOM, "registry", "store", "netpolicy"},
    "api": {
        *BOTTOM,
        "__init__",
        *"remote_write catalog selfmetrics netpolicy ingest store registry query gateway config".split(),
    },
    "importer": {*BOTTOM, "config", "ingest", "registry", "store"},
    "client": {*BOTTOM},
    "cli": {*BOTTOM, "__init__", "api", "client", "config", "demo", "importer", "ingest"},
    "__main__": {"cli"},
    "demo": set(),
    "dashboard": set(),
}
"""Top-level module or package -> the top-level modules it may import (besides itself)."""


def _module_of(path: Path) -> list[str]:
    """``servemetrics/a/b.py`` -> ``["a", "b"]``; a package's ``__init__.py`` names the package."""
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts


def imported_tops(path: Path, source: str | None = None) -> set[str]:
    """Top-level ``servemetrics`` modules ``path`` (or ``source`` read as that file) imports: absolute,
    relative and ``from servemetrics import x`` forms resolved (``from servemetrics import __version__``
    counts as ``__init__``)."""
    package = _module_of(path)[:-1] if path.name != "__init__.py" else _module_of(path)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("servemetrics."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["servemetrics", *package[: len(package) - (node.level - 1)]]
                dotted = [*base, *(node.module.split(".") if node.module else [])]
            else:
                dotted = (node.module or "").split(".")
            if dotted[0] != "servemetrics":
                continue
            if len(dotted) > 1:
                out.add(dotted[1])
            else:
                tops = {p.stem for p in PKG.iterdir()}
                out.update(a.name if a.name in tops else "__init__" for a in node.names)
    return out


def test_no_layer_imports_one_above_it():
    bad = []
    for path in PKG.rglob("*.py"):
        top = _module_of(path)[0]
        assert top in ALLOWED, f"servemetrics.{top} is not placed in tests/test_architecture.ALLOWED"
        for target in imported_tops(path) - ALLOWED[top] - {top}:
            bad.append(f"{path.relative_to(PKG)} imports servemetrics.{target}")
    assert bad == []


def test_the_import_resolver_sees_every_spelling():
    """The four spellings of "catalog imports store" are all seen (the review's mutation table)."""
    spellings = [
        "import servemetrics.store",
        "from servemetrics.store import base",
        "from servemetrics import store",
        "from ..store import base",
    ]
    seen = {line: "store" in imported_tops(PKG / "catalog" / "model.py", line + "\n") for line in spellings}
    assert seen == dict.fromkeys(spellings, True)


def test_only_the_edges_read_the_config():
    readers = sorted(
        str(rel)
        for p in PKG.rglob("*.py")
        if "config" in imported_tops(p) and (rel := p.relative_to(PKG)).parts[0] != "config"
    )
    assert readers == ["api/app.py", "api/service.py", "cli.py", "importer.py"]
