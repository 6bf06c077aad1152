"""The demo's Model API table and its check against the client's counts (docs/demo.md "What it prints").

One call, ``GET /v1/model_apis/demo-chat/metrics`` in SUMMARY mode since the load started, of the
requests by status, the rate-limited requests and the tokens, all split by team; the table has a row
per team: answers by status class, rate limited (the 429s of the team's limit, also in 4xx) and tokens
by type. ``agreement`` compares each figure with the ``ChatLoad``'s own counts.
"""

from __future__ import annotations

from typing import Any

import httpx
from rich.table import Table

from servemetrics.demo import report

P = "baseten_model_api_"
METRICS = [P + "inference_requests_total", P + "rate_limited_requests_total", P + "tokens_total"]
COLUMNS = ("2xx", "4xx", "5xx", "rate limited", "input_cached", "input_uncached", "output")
"""A team's figures: answers by status class, rate limited, tokens by type (counts, over the window)."""


def query(client: httpx.Client, base: str, name: str, start_ms: int, end_ms: int) -> dict[str, Any]:
    """The SUMMARY of ``METRICS`` of Model API ``name`` over ``[start_ms, end_ms]``; raises on a non-2xx."""
    return report.query(client, f"{base}/v1/model_apis/{name}/metrics", "SUMMARY", METRICS, start_ms, end_ms)


def per_team(body: dict[str, Any]) -> dict[str, dict[str, float]]:
    """team id -> ``COLUMNS`` -> value of the SUMMARY ``body`` (0 where the team has no series: a
    metric without series in the window is left out of the answer)."""
    out: dict[str, dict[str, float]] = {}
    row = body["metric_values"][-1]["values"] if body["metric_values"] else []
    for d, values in zip(body["metric_descriptors"], row, strict=True):
        for labels, value in zip(d["label_sets"], values, strict=True):
            column = labels.get("status") or labels.get("token_type") or "rate limited"
            team = out.setdefault(labels["team_id"], dict.fromkeys(COLUMNS, 0.0))
            team[column] = value or 0.0
    return out


def table(body: dict[str, Any], title: str) -> Table:
    """team | the ``COLUMNS`` of ``per_team``."""
    out = Table(title=title, title_justify="left")
    out.add_column("team")
    for column in COLUMNS:
        tokens = " tokens" if column.startswith(("input", "output")) else ""
        out.add_column(column.replace("_", " ") + tokens, justify="right")
    for team, figures in sorted(per_team(body).items()):
        out.add_row(team or "(no team)", *(f"{figures[c]:g}" for c in COLUMNS))
    return out


def client_figures(counts: dict[str, int], tokens: dict[str, int]) -> dict[str, int]:
    """The ``COLUMNS`` of one team as its client counted them (``ChatLoad.snapshot``)."""
    return {**{c: counts.get(c, 0) for c in COLUMNS[:4]}, **{t: tokens.get(t, 0) for t in COLUMNS[4:]}}


def agreement(
    counts: dict[str, dict[str, int]], tokens: dict[str, dict[str, int]], body: dict[str, Any]
) -> list[str]:
    """One line per team: the client's figures, the SUMMARY's, and whether they are equal, e.g.
    ``model API calls counted by the client, team support: 2xx 14, …; SUMMARY: 2xx 14, …: equal``."""
    served = per_team(body)
    lines = []
    for team in sorted(counts):
        mine = client_figures(counts[team], tokens[team])
        theirs = served.get(team, dict.fromkeys(COLUMNS, 0.0))
        same = all(round(theirs[c], 6) == mine[c] for c in COLUMNS)
        shown = ", ".join(f"{c} {mine[c]}" for c in COLUMNS)
        told = ", ".join(f"{c} {theirs[c]:g}" for c in COLUMNS)
        lines.append(
            f"model API calls counted by the client, team {team}: {shown}; SUMMARY: {told}: "
            f"{'equal' if same else 'DIFFERENT'}"
        )
    return lines
