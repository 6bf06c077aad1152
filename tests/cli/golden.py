"""Golden outputs of the CLI: ``golden/<name>.txt`` holds the command, its exit code, stdout and stderr.
``SERVEMETRICS_UPDATE_GOLDEN=1`` rewrites them (then read the diff: every number is checked by hand
against the data of ``tests/cli/conftest.py``)."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"


def transcript(args: list[str], code: int, stdout: str, stderr: str) -> str:
    """The text a golden file holds for one invocation (the URL and key flags left out)."""
    return f"$ servemetrics {' '.join(args)}\nexit: {code}\n--- stdout\n{stdout}--- stderr\n{stderr}"


def check(name: str, text: str) -> None:
    """``text`` equals ``golden/<name>.txt`` (written instead with ``SERVEMETRICS_UPDATE_GOLDEN=1``)."""
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("SERVEMETRICS_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"no golden {path}; run with SERVEMETRICS_UPDATE_GOLDEN=1 and check it by hand"
    assert text == path.read_text()
