"""The catalog's dashboard fields: panels in the spec page's order, legends, graphs shown by default."""

from __future__ import annotations

from servemetrics.catalog import CATALOG
from servemetrics.catalog.engines import ENGINE_ROWS
from servemetrics.catalog.llm import LLM_ROWS
from servemetrics.catalog.render import markdown_table

SPEC_PANELS = [
    "Inference volume",
    "Incoming request volume",
    "End-to-end response time",
    "Time to first byte",
    "Request size",
    "Response size",
    "Replicas",
    "Restarts",
    "Concurrent requests",
    "CPU usage",
    "CPU memory",
    "GPU usage",
    "GPU memory",
    "GPU temperature",
    "GPU tensor core utilization",
    "GPU memory bandwidth utilization",
    "Time in async queue",
    "Async queue size",
    "Webhook requests",
    "Webhook latency",
]
"""The graphs of metrics-dashboard.md, in the page's order."""


ENGINE_PANELS = list(dict.fromkeys(m.panel for m in ENGINE_ROWS))
"""The engine graphs (catalog/engines.py), after the platform's, all hidden by default."""
LLM_PANELS = list(dict.fromkeys(m.panel for m in LLM_ROWS))
"""The ``baseten_llm_*`` graphs (catalog/llm.py), between the platform's and the engines', hidden."""


def _panels() -> list[str]:
    return list(dict.fromkeys(m.panel for m in CATALOG.values()))


def test_panels_follow_the_spec_page_then_the_hidden_ones():
    hidden = ["WebSocket connections", "Pod readiness", *LLM_PANELS, *ENGINE_PANELS]
    assert _panels() == [*SPEC_PANELS, *hidden]
    assert all(p.startswith(("vLLM ", "SGLang ")) for p in ENGINE_PANELS)
    assert all(p.startswith("LLM ") for p in LLM_PANELS) and len(LLM_PANELS) == 13


def test_metrics_of_one_panel_are_adjacent_and_named_by_legend():
    names = list(CATALOG)
    for panel in _panels():
        members = [n for n in names if CATALOG[n].panel == panel]
        first = names.index(members[0])
        assert names[first : first + len(members)] == members, panel
        legends = [CATALOG[n].legend for n in members]
        if len(members) == 1:
            assert legends == [""], panel
        else:
            assert "" not in legends and len(set(legends)) == len(legends), panel
    replicas = {CATALOG[n].legend: n for n in names if CATALOG[n].panel == "Replicas"}
    assert replicas == {
        "Active": "baseten_replicas_active",
        "Starting": "baseten_replicas_starting",
        "Desired": "baseten_replicas_desired",
    }


def test_default_visible_is_the_spec_page_graphs():
    shown = {m.panel for m in CATALOG.values() if m.default_visible}
    hidden = {m.panel for m in CATALOG.values() if not m.default_visible}
    assert shown == set(SPEC_PANELS)
    assert hidden == {"WebSocket connections", "Pod readiness", *LLM_PANELS, *ENGINE_PANELS}
    assert not any(n.startswith(("vllm:", "sglang:")) and CATALOG[n].default_visible for n in CATALOG)


def test_docs_table_shows_the_graph_columns():
    table = markdown_table()
    assert "| panel | legend | shown by default |" in table
    row = next(line for line in table.splitlines() if "`baseten_replicas_desired`" in line)
    assert "| Replicas | Desired | yes |" in row
    row = next(line for line in table.splitlines() if "`baseten_pod_readiness`" in line)
    assert "| Pod readiness |  | no |" in row
