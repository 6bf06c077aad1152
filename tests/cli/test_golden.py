"""Golden outputs of every client command and mode against the real service of ``conftest.py``
(issue 14 "How we will know": "CLI golden tests for every command and mode"). The values in
``golden/*.txt`` are those of the conftest docstring: e.g. the summary hour of ``replicas_active`` is
the mean of 60 ones and 60 threes = 2, the requests 7200 over 3600 s = ``7200 (2/s)``; the series chart's
60 columns are two 30 s steps each, 30 columns of 1 (``▁``) then 30 of 3 (``█``)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.apptools import auth
from tests.cli.conftest import MANAGE, NOW, Served, invoke
from tests.cli.golden import check, transcript
from tests.query.helpers import T0

HOUR = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00Z"]
ENV = ["model", "environment", "metrics", "--model-id", "m1", "--environment", "production"]
DEP = ["model", "deployment", "metrics", "--model-name", "llama", "--deployment-id", "d1"]
LOOPS = ["loops", "deployment", "metrics", "--deployment-id", "t1"]
TWO_MIN = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:02:00Z"]
CASES = {
    "model_list": ["model", "list"],
    "model_list_by_name": ["model", "list", "--name", "whisper"],
    "environment_list": ["model", "environment", "list", "--model-name", "llama"],
    "environment_current": ENV,
    "environment_summary_since": [*ENV, "--mode", "summary", "--since", "1h"],
    "environment_series": [*ENV, "--mode", "series", *HOUR],
    "environment_series_no_chart": [
        *ENV,
        "--mode",
        "series",
        "--start",
        "2026-01-01T00:29:00Z",
        "--end",
        "2026-01-01T00:31:00Z",
        "--metric",
        "baseten_replicas_active",
        "--metric",
        "baseten_inference_requests_total",
        "--no-chart",
    ],
    # a time without offset is local time: UTC here (conftest's CLOCK); the mode in any case
    "deployment_summary_half_hour": [
        *DEP,
        "--mode",
        "SUMMARY",
        "--start",
        "2026-01-01T00:00",
        "--end",
        "2026-01-01T00:30",
        "--metric",
        "baseten_inference_requests_total",
        "--metric",
        "baseten_replicas_active",
    ],
    "deployment_without_data": [
        "model",
        "deployment",
        "metrics",
        "--model-id",
        "m1",
        "--deployment-id",
        "d2",
    ],
    # the platform's alias: the deployment production points at (d1)
    "deployment_production_alias": [
        *["model", "deployment", "metrics", "--model-id", "m1", "--deployment-id", "production"],
        *["--metric", "baseten_replicas_active"],
    ],
    "loops_series": [*LOOPS, *TWO_MIN],
    "loops_no_chart_per_minute": [
        *LOOPS,
        *TWO_MIN,
        "--step-seconds",
        "60",
        "--time-divisor-seconds",
        "60",
        "--no-chart",
    ],
    "events": [
        "events",
        "--model-name",
        "llama",
        "--since",
        "30d",
        "--kind",
        "PROMOTED",
        "--kind",
        "DEPLOYED",
    ],
}


@pytest.mark.parametrize("name", CASES)
def test_golden(served: Served, name: str) -> None:
    args = CASES[name]
    code, out, err = invoke([*args, "--url", served.base, "--api-key", MANAGE])
    check(name, transcript(args, code, out, err))


def _api(served: Served, method: str, path: str, **kw: object) -> object:
    resp = httpx.request(method, served.base + path, headers=auth(MANAGE), timeout=30, **kw)  # type: ignore[arg-type]
    assert resp.status_code == 200, resp.text
    return resp.json()


def _json_out(served: Served, args: list[str]) -> tuple[str, str]:
    code, out, err = invoke([*args, "--output", "json", "--url", served.base, "--api-key", MANAGE])
    assert code == 0, err
    return out, err


def test_json_is_the_answer_unchanged(served: Served) -> None:
    """``--output json`` prints the API's answer as it came (same keys in the same order), indented by
    two spaces; the Window line stays on stderr."""
    out, err = _json_out(served, [*ENV, "--mode", "series", *HOUR, "--metric", "baseten_replicas_active"])
    params = {"mode": "SERIES", "start_epoch_millis": T0, "end_epoch_millis": NOW}
    params["metrics"] = "baseten_replicas_active"
    answer = _api(served, "GET", "/v1/models/m1/environments/production/metrics", params=params)
    assert out == json.dumps(answer, indent=2) + "\n"
    assert err == "Window: 2026-01-01T00:00:00+00:00 → 2026-01-01T01:00:00+00:00 (1h) · 30s/step\n"
    for args, path in (
        (["model", "list"], "/v1/models"),
        (["model", "environment", "list", "--model-id", "m1"], "/v1/models/m1/environments"),
    ):
        assert json.loads(_json_out(served, args)[0]) == _api(served, "GET", path)


def test_loops_json_is_the_answer_unchanged(served: Served) -> None:
    out, _ = _json_out(served, [*LOOPS, *TWO_MIN])
    body = {"start_epoch_millis": T0, "end_epoch_millis": T0 + 120_000}
    assert (
        out
        == json.dumps(_api(served, "POST", "/v1/loops/deployments/t1/metrics", json=body), indent=2) + "\n"
    )


def test_on_a_terminal_a_progress_bar_shows_on_stderr_only(served: Served) -> None:
    """With stderr taken for a terminal (Rich's ``TTY_COMPATIBLE=1``) the call shows its progress bar
    ("querying metrics") on stderr; stdout is the same table as without one."""
    args = CASES["environment_summary_since"]
    code, out, err = invoke([*args, "--url", served.base, "--api-key", MANAGE], TTY_COMPATIBLE="1")
    _, plain_out, _ = invoke([*args, "--url", served.base, "--api-key", MANAGE])
    assert (code, out) == (0, plain_out)
    assert "querying metrics" in err
    assert err.endswith("Window: 2026-01-01T00:00:00+00:00 → 2026-01-01T01:00:00+00:00 (1h)\n")
