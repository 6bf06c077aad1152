"""The catalog's dashboard fields: panels in the spec page's order, legends, graphs shown by default."""

from __future__ import annotations

from servemetrics.catalog import CATALOG
from servemetrics.catalog.engine_rows import ENGINE_ROWS
from servemetrics.catalog.llm import LLM_ROWS
from servemetrics.catalog.model_apis import MODEL_API_ROWS
from servemetrics.catalog.render import markdown_table

SPEC_PANELS = [
    "Inference volume",
    "Incoming request volume",
    "End-to-end response time",
    "Inference time",
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


GPU_MORE = ["GPU power", "GPU SM clock", "GPU memory health"]
"""DCGM's power, clock and memory health (issue 16 part 3): not on the spec page, listed hidden."""
LLM_PANELS = list(dict.fromkeys(m.panel for m in LLM_ROWS))
"""The ``baseten_llm_*`` graphs (catalog/llm.py), the LLM group's first, all hidden by default."""
ENGINE_PANELS = [p for p in dict.fromkeys(m.panel for m in ENGINE_ROWS) if p not in LLM_PANELS]
"""The engines' own graphs and their derived token speeds (catalog/engines.py)."""
ENGINE_SHOWN = {
    "vLLM requests",
    "vLLM KV-cache usage",
    "vLLM TTFT",
    "vLLM inter-token latency",
    "vLLM output token throughput",
    "SGLang requests",
    "SGLang KV-cache usage",
    "SGLang TTFT",
    "SGLang inter-token latency",
    "SGLang output token throughput",
}
"""Engine graphs shown by default (issue 13 part 5: tokens/s, TTFT, time per output token, KV-cache
usage, running / waiting); the others are listed hidden in Customize view."""


MODEL_API_PANELS = list(dict.fromkeys(m.panel for m in MODEL_API_ROWS))


def _panels() -> list[str]:
    return list(dict.fromkeys(m.panel for m in CATALOG.values()))


def test_panels_follow_the_spec_page_then_the_hidden_ones():
    hidden = [
        "WebSocket connections",
        "Pod readiness",
        *GPU_MORE,
        *dict.fromkeys(m.panel for m in ENGINE_ROWS),
        *dict.fromkeys(m.panel for m in MODEL_API_ROWS),
    ]
    # the Engine group, then the LLM group (baseten_llm_* first), then the Model APIs group
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
    assert shown == set(SPEC_PANELS) | ENGINE_SHOWN
    assert hidden == {
        "WebSocket connections",
        "Pod readiness",
        *GPU_MORE,
        *LLM_PANELS,
        *(set(ENGINE_PANELS) - ENGINE_SHOWN),
        *MODEL_API_PANELS,  # drawn on the Model API's own tab, not a model's
    }
    # most engine graphs (40 engine panels, 10 shown), every LLM graph, every Model API graph
    assert len(hidden) - 2 - 3 == 30 + 13 + 10
    assert len(ENGINE_PANELS) == 40


def test_groups_engine_then_llm_after_the_platform():
    groups = list(dict.fromkeys(m.group for m in CATALOG.values()))
    assert groups == ["", "Engine", "LLM", "Model APIs"]
    model_api = {m.name for m in CATALOG.values() if m.name.startswith("baseten_model_api_")}
    assert {m.name for m in CATALOG.values() if m.group == "Model APIs"} == model_api
    assert {m.name for m in CATALOG.values() if m.group == "LLM"} == {
        m.name
        for m in CATALOG.values()
        if (m.derived is not None or m.name.startswith("baseten_llm_")) and m.name not in model_api
    }
    assert all(m.group == "Engine" for m in CATALOG.values() if m.derived is None and ":" in m.name)
    platform = [m for m in CATALOG.values() if ":" not in m.name and "_llm_" not in m.name]
    assert all(m.group == "" for m in platform if m.name not in model_api)


def test_docs_table_shows_the_graph_columns():
    table = markdown_table()
    assert "| panel | legend | shown by default |" in table
    row = next(line for line in table.splitlines() if "`baseten_replicas_desired`" in line)
    assert "| Replicas | Desired | yes |" in row
    row = next(line for line in table.splitlines() if "`baseten_pod_readiness`" in line)
    assert "| Pod readiness |  | no |" in row
