"""Where the commands find the service (docs/cli.md "Server and key"): ``--url`` / ``--api-key`` over
``SERVEMETRICS_URL`` / ``SERVEMETRICS_API_KEY`` over the profile file; a bad profile is exit 2. And the
local time zone of ``--start`` / ``--end`` in a real process (``TZ``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import MANAGE, Served, invoke
from tests.conftest import REPO_ROOT
from tests.processes import free_port

LIST = ["model", "list", "--output", "json"]


def _ids(out: str) -> list[str]:
    import json

    return [m["id"] for m in json.loads(out)["models"]]


def test_the_profile_gives_url_and_key(served: Served, tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"url: {served.base}\napi_key: {MANAGE}\n")
    code, out, err = invoke(LIST, SERVEMETRICS_PROFILE=str(profile))
    assert (code, _ids(out)) == (0, ["m1", "m2", "m3"]), err
    xdg = tmp_path / "xdg"
    (xdg / "servemetrics").mkdir(parents=True)
    (xdg / "servemetrics" / "profile.yaml").write_text(profile.read_text())
    code, out, err = invoke(LIST, XDG_CONFIG_HOME=str(xdg))
    assert (code, _ids(out)) == (0, ["m1", "m2", "m3"]), err


def test_flags_beat_the_environment_which_beats_the_profile(served: Served, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"url: {dead}\napi_key: sm-wrong\n")
    env = {"SERVEMETRICS_PROFILE": str(profile)}
    code, out, _ = invoke(LIST, **env, SERVEMETRICS_URL=served.base, SERVEMETRICS_API_KEY=MANAGE)
    assert (code, _ids(out)) == (0, ["m1", "m2", "m3"])
    code, _, err = invoke(
        [*LIST, "--api-key", "sm-wrong-too"], **env, SERVEMETRICS_URL=served.base, SERVEMETRICS_API_KEY=MANAGE
    )
    assert code == 3, err
    code, _, err = invoke(
        [*LIST, "--url", dead], **env, SERVEMETRICS_URL=served.base, SERVEMETRICS_API_KEY=MANAGE
    )
    assert (code, err.startswith(f"error: cannot reach {dead}")) == (1, True)


def test_a_bad_profile_is_one_line_and_exit_2(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    cases = {
        "url: http://x\ntoken: abc\n": (
            f"error: profile {profile}: unknown key(s) token; it holds url and api_key\n"
        ),
        "api_key: 123\n": f"error: profile {profile}: api_key must be a string (quote it)\n",
        "- url\n": f"error: profile {profile} must be a mapping with url and api_key\n",
    }
    for text, message in cases.items():
        profile.write_text(text)
        assert invoke(LIST, SERVEMETRICS_PROFILE=str(profile))[::2] == (2, message)
    missing = tmp_path / "missing.yaml"
    code, _, err = invoke(LIST, SERVEMETRICS_PROFILE=str(missing))
    assert (code, err) == (
        2,
        f"error: profile {missing} does not exist; create it or unset SERVEMETRICS_PROFILE\n",
    )


def test_local_time_in_a_real_process(served: Served) -> None:
    """``python -m servemetrics`` with ``TZ=Asia/Kolkata`` (UTC+05:30, no DST): 05:30-06:00 local is
    00:00-00:30 UTC, the half hour of 1 replica; the Window line is in local time."""
    args = [
        "model",
        "deployment",
        "metrics",
        "--model-id",
        "m1",
        "--deployment-id",
        "d1",
        "--mode",
        "summary",
    ]
    args += [
        "--start",
        "2026-01-01T05:30",
        "--end",
        "2026-01-01T06:00",
        "--metric",
        "baseten_replicas_active",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVEMETRICS_")}
    proc = subprocess.run(
        [sys.executable, "-m", "servemetrics", *args, "--url", served.base, "--api-key", MANAGE],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**env, "TZ": "Asia/Kolkata", "PYTHONPATH": str(REPO_ROOT), "XDG_CONFIG_HOME": "/nonexistent"},
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (
        0,
        "METRIC                   VALUE\nbaseten_replicas_active      1\n",
    ), proc.stderr
    assert proc.stderr == "Window: 2026-01-01T05:30:00+05:30 → 2026-01-01T06:00:00+05:30 (30m)\n"
