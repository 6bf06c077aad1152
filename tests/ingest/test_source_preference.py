"""One order of a replica's container views (C13, "one container, one value"): the catalog's
``MetricDef.sources`` (the truth, read by ``query/execute.py``) and the adapter table's ``Rule.preference``
column (compiled into the recording rules) must say the same."""

from __future__ import annotations

import itertools

from servemetrics.catalog import CATALOG, Scope
from servemetrics.ingest.adapters import ADAPTERS


def _preferences(name: str) -> dict[str, set[int]]:
    """``source`` -> the preferences of the table's rules that make canonical ``name`` (a histogram's
    ``_bucket`` / ``_sum`` / ``_count``)."""
    out: dict[str, set[int]] = {}
    for rules in ADAPTERS.values():
        for rule in rules:
            if rule.target in (name, *(name + suffix for suffix in ("_bucket", "_sum", "_count"))):
                out.setdefault(rule.source, set()).add(rule.preference)
    return out


def test_adapter_preferences_follow_the_catalog_source_order() -> None:
    checked = 0
    for metric in CATALOG.values():
        prefs = _preferences(metric.name)
        assert all(len(p) == 1 for p in prefs.values()), (metric.name, prefs)
        one = {source: next(iter(p)) for source, p in prefs.items()}
        if not metric.sources:
            assert set(one.values()) <= {0}, (metric.name, one)
            continue
        assert metric.scope is Scope.REPLICA, metric.name
        assert set(metric.sources) <= set(one), (metric.name, "a listed source no adapter makes")
        for a, b in itertools.permutations(one, 2):  # a preferred by the query <=> a higher in the table
            query_prefers = metric.source_rank(a) < metric.source_rank(b)
            assert query_prefers == (one[a] > one[b]), (metric.name, a, b, one)
        checked += 1
    assert checked == 2 + 13  # CPU and working set; the 13 stored baseten_llm_* rows (native first)


def test_container_order() -> None:
    cpu = CATALOG["baseten_container_cpu_usage_seconds_total"]
    assert cpu.sources == ("cadvisor", "kubelet_resource", "process")
    assert CATALOG["baseten_container_cpu_memory_working_set_bytes"].sources == cpu.sources
    assert cpu.source_rank("") == 3  # a replica exposing the canonical name itself: after every view
