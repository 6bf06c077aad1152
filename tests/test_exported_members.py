"""Every package's ``__all__`` is what it really exports (httpx's tests/test_exported_members.py habit):
each listed name exists, and each public name a package's ``__init__`` defines (or, in a pure
re-export ``__init__``, imports) is listed."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import servemetrics

PACKAGES = [
    "servemetrics",
    "servemetrics.catalog",
    "servemetrics.config",
    "servemetrics.gateway",
    "servemetrics.ingest.adapters",
    "servemetrics.query",
    "servemetrics.registry",
    "servemetrics.remote_write",
    "servemetrics.store",
]


def _bound_names(init: Path) -> set[str]:
    """Names an ``__init__.py`` binds at top level: defs, classes, assignments, and, in a package whose
    ``__init__`` only re-exports (defines no function), the names it imports from ``servemetrics``
    modules (not the standard library or third-party helpers it uses)."""
    body = ast.parse(init.read_text()).body
    reexports = not any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in body)
    out: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
        elif (
            reexports and isinstance(node, ast.ImportFrom) and (node.module or "").startswith("servemetrics")
        ):
            out.update(a.asname or a.name for a in node.names)
    return out - {"__all__"}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_exactly_the_public_names(name):
    package = importlib.import_module(name)
    public = {n for n in _bound_names(Path(package.__file__)) if not n.startswith("_")}
    exported = set(package.__all__)
    assert sorted(n for n in exported if not hasattr(package, n)) == []
    assert sorted(public - exported) == []


def test_the_root_names_the_shared_unit():
    assert servemetrics.__all__ == [
        "Labels",
        "Millis",
        "Sample",
        "SampleBatch",
        "SeriesKey",
        "__version__",
        "labels_of",
    ]
    assert servemetrics.Sample("m", (), 1.0, 5).key == ("m", ())
