"""Every command's ``--help`` is written for users (issue 15): it exits 0, says what the command does, and
shows no reStructuredText markup or internal module names (the docstrings are for developers)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from servemetrics import cli


def _paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            out += _paths(sub, (*prefix, name))
    return out


PATHS = _paths(typer.main.get_command(cli.app))
INTERNAL = re.compile(r"``|\b(?:api|registry|store|ingest|query|config)\.\w+|idempotent|app's startup")


def test_the_tree_is_every_command():
    names = {" ".join(p) for p in PATHS}
    assert {"serve", "import", "demo", "rules", "version", "events", "model list"} <= names
    assert {"model environment metrics", "model deployment metrics", "loops deployment metrics"} <= names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "servemetrics")
def test_help_is_for_users(path):
    result = CliRunner().invoke(cli.app, [*path, "--help"], prog_name="servemetrics", env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "Usage: servemetrics" in text
    assert not INTERNAL.search(text), INTERNAL.search(text)
    summary = text.split("Usage:", 1)[1].split("\n", 2)[2].split("╭", 1)[0].strip()
    assert len(summary) >= 15, f"{path}: no description of what it does"
