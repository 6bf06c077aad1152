"""The client-side checks (platform-facts §3 "Client-side validation"): each is one ``error:`` line on
stderr and exit code 2 (Typer's usage code), before any call: these invocations point at a port where
nothing listens, so a check that let the call through would exit 1 instead."""

from __future__ import annotations

import pytest

from tests.cli.conftest import invoke
from tests.processes import free_port

ENV = ["model", "environment", "metrics", "--model-id", "m1"]
LOOPS = ["loops", "deployment", "metrics", "--deployment-id", "t1"]
CHECKS = [
    (
        [*ENV, "--since", "1h"],
        "--mode current takes no --start, --end or --since: omit them, or use --mode summary or "
        "--mode series for a time range",
    ),
    ([*ENV, "--start", "2026-01-01T00:00:00Z"], "--mode current takes no --start, --end or --since"),
    (
        [*ENV, "--mode", "summary", "--since", "1h", "--end", "2026-01-01T00:00:00Z"],
        "--since cannot be combined with --start or --end: give one or the other",
    ),
    (
        [*ENV, "--mode", "series", "--start", "2026-01-01T01:00:00Z", "--end", "2026-01-01T00:00:00Z"],
        "--start must be earlier than --end",
    ),
    (  # 7 d 1 h: longer than the longest window; an offset given is used as given
        [*ENV, "--mode", "series", "--start", "2026-01-01T00:00:00+01:00", "--end", "2026-01-08T00:00:00Z"],
        "the window is 7d1h long; it may be at most 7d: move --start later or --end earlier",
    ),
    (
        [*ENV, "--mode", "summary", "--since", "8d"],
        "--since 8d is longer than 7d, the longest window; write at most 7d",
    ),
    (
        [*ENV, "--mode", "summary", "--since", "168h1s"],
        "--since 168h1s is longer than 7d, the longest window; write at most 7d",
    ),
    (
        [*ENV, "--mode", "summary", "--since", "-1h"],
        "--since must be positive (at least 1ms), not '-1h'; write a duration like 90s, 15m, 1h30m or 7d",
    ),
    (
        [*ENV, "--mode", "summary", "--since", "0"],
        "--since must be positive (at least 1ms), not '0'; write a duration like 90s, 15m, 1h30m or 7d",
    ),
    (
        [*ENV, "--mode", "summary", "--since", "1 hour"],
        "--since '1 hour' is not a duration; write a duration like 90s, 15m, 1h30m or 7d",
    ),
    (
        [*ENV, "--mode", "summary", "--start", "yesterday"],
        "--start 'yesterday' is not an ISO-8601 time; write e.g. 2026-01-01T12:00:00Z, or 2026-01-01T12:00 "
        "for local time",
    ),
    (["model", "environment", "metrics"], "give --model-id or --model-name (one of them)"),
    ([*ENV, "--model-name", "llama"], "give --model-id or --model-name (one of them)"),
    (["events", "--model-id", "m1", "--since", "1d", "--start", "2026-01-01"], "--since cannot be combined"),
    (
        [*LOOPS, "--mode", "summary"],
        "--mode summary: the Loops endpoint answers series only; use --mode series (the default), or the "
        "sampler's `servemetrics model deployment metrics` for one value",
    ),
    ([*LOOPS, "--since", "7d1h"], "--since '7d1h' is not a duration"),
]


@pytest.mark.parametrize(("args", "message"), CHECKS)
def test_a_bad_flag_is_one_error_line_and_exit_2(args: list[str], message: str) -> None:
    code, out, err = invoke([*args, "--url", f"http://127.0.0.1:{free_port()}", "--api-key", "k"])
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_events_take_windows_longer_than_7_days() -> None:
    """The events API has no longest window, so ``--since 30d`` passes the checks (and reaches the
    network: exit 1, nothing listens)."""
    code, _, err = invoke(
        [
            "events",
            "--model-id",
            "m1",
            "--since",
            "30d",
            "--url",
            f"http://127.0.0.1:{free_port()}",
            "--api-key",
            "k",
        ]
    )
    assert (code, err.split(":")[0]) == (1, "error")
    assert "cannot reach" in err


def test_typer_refuses_an_unknown_mode_with_exit_2() -> None:
    code, _, err = invoke([*ENV, "--mode", "hourly", "--api-key", "k"])
    assert code == 2
    assert "Invalid value for '--mode'" in err and "'hourly' is not one of" in err


def test_no_key_anywhere_is_exit_2() -> None:
    code, _, err = invoke(["model", "list"])
    assert code == 2
    assert err == (
        "error: no API key: pass --api-key, set SERVEMETRICS_API_KEY, or write api_key in the profile "
        "(/nonexistent-servemetrics-cli-test/servemetrics/profile.yaml)\n"
    )
