"""The adapter table compiled to PromQL recording rules: exact expressions, completeness, the documented
differences, and the rule file as Prometheus' ``promtool`` and VictoriaMetrics' ``vmalert`` read it.
(Agreement with ``adapt`` on the real fixtures: ``tests/engines/test_recording_rules.py``.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from servemetrics import cli
from servemetrics.ingest.adapters import ADAPTERS, LabelMatch, Rule
from servemetrics.ingest.recording_rules import (
    AGENT_UNSCRAPABLE,
    DIFFERENCES,
    EXPOSED_PREFIX,
    NotCompilableError,
    compile_groups,
    exposed_names,
    exposed_relabel_config,
    le_spellings,
    operand,
    prometheus_duration,
    quote,
    render,
    rule_file,
)
from tests.conftest import REPO_ROOT

BY = "model_id, model_name, deployment_id, replica, environment, rollout_phase, node_id"
WITHOUT = (
    "job, instance, exported_model_id, exported_model_name, exported_deployment_id, exported_replica, "
    "exported_environment, exported_rollout_phase, exported_node_id"
)


def _rule(group: str, record: str, source: str):
    [found] = [
        r
        for g in compile_groups()
        if g.name == f"servemetrics_{group}"
        for r in g.rules
        if (r.record, r.source) == (record, source)
    ]
    return found


def test_dcgm_utilisation_prof_beats_dev_percent():
    rule = _rule("dcgm", "baseten_gpu_utilization", "dcgm")
    assert rule.expr == (
        f"max by (gpu, gpu_instance, {BY}) (label_replace(DCGM_FI_PROF_GR_ENGINE_ACTIVE < Inf > -Inf, "
        '"gpu_instance", "$1", "GPU_I_ID", "(.*)"))'
        f" or max by (gpu, gpu_instance, {BY}) "
        '(label_replace(DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=~""} < Inf > -Inf, "gpu_instance", "$1", "GPU_I_ID", '
        '"(.*)")) / 100.0'
    )


KUBELET_MEM = (
    f"max by (namespace, pod, container, {BY}) "
    '(container_memory_working_set_bytes{container!~"|POD",id=~".+"} < Inf > -Inf)'
)
STANDALONE_MEM = (
    f"max by (container, {BY}) (label_replace(container_memory_working_set_bytes"
    '{container=~"",pod=~"",name=~".+"} < Inf > -Inf, "container", "$1", "name", "(.*)"))'
)
RESOURCE_MEM = (
    f"max by (namespace, pod, container, {BY}) "
    '(container_memory_working_set_bytes{container!~"|POD",id=~""} < Inf > -Inf)'
)
ON_REPLICA = " unless on (model_id, deployment_id, replica) "


def test_where_matchers_and_one_rule_per_source():
    rule = _rule("cadvisor", "baseten_container_cpu_memory_working_set_bytes", "cadvisor")
    assert rule.expr == f"{KUBELET_MEM} or {STANDALONE_MEM}"
    [group] = [g for g in compile_groups() if g.name == "servemetrics_cadvisor"]
    assert [(r.record, r.source) for r in group.rules] == [
        ("baseten_container_cpu_usage_seconds_total", "cadvisor"),
        ("baseten_container_cpu_memory_working_set_bytes", "cadvisor"),
        ("baseten_container_cpu_usage_seconds_total", "kubelet_resource"),
        ("baseten_container_cpu_memory_working_set_bytes", "kubelet_resource"),
    ]


def test_c13_compiled_rules_pick_the_preferred_source():
    """One container, one value (C13): a lower view of a replica is recorded only ``unless on`` the
    replica's labels a higher view has a series, highest first, the order the query layer applies."""
    mem = "baseten_container_cpu_memory_working_set_bytes"
    resource = _rule("cadvisor", mem, "kubelet_resource")
    assert resource.expr == f"({RESOURCE_MEM}){ON_REPLICA}({KUBELET_MEM} or {STANDALONE_MEM})"
    process = _rule("process", mem, "process")
    assert process.expr == (
        f"(max by ({BY}) (process_resident_memory_bytes < Inf > -Inf))"
        f"{ON_REPLICA}({KUBELET_MEM} or {STANDALONE_MEM} or {RESOURCE_MEM})"
    )
    own = _rule("passthrough", mem, "")  # a replica exposing the canonical name: after every named view
    assert own.expr.endswith(
        f"{ON_REPLICA}({KUBELET_MEM} or {STANDALONE_MEM} or {RESOURCE_MEM} or "
        f"max by ({BY}) (process_resident_memory_bytes < Inf > -Inf))"
    )
    cpu = "baseten_container_cpu_usage_seconds_total"
    assert ON_REPLICA not in _rule("cadvisor", cpu, "cadvisor").expr
    assert ON_REPLICA in _rule("process", cpu, "process").expr


def test_preference_only_where_a_higher_view_exists():
    """Rules of names without preferences compile as before; one source with two preferences does not."""
    table = {"a": (Rule("x", "t", "s1", {}), Rule("y", "t", "s2", {}))}
    assert [r.expr for g in compile_groups(table) for r in g.rules] == [
        f"max by ({BY}) (x < Inf > -Inf)",
        f"max by ({BY}) (y < Inf > -Inf)",
    ]
    mixed = {"a": (Rule("x", "t", "s1", {}, preference=2), Rule("y", "t", "s1", {}, preference=1))}
    with pytest.raises(NotCompilableError, match="one preference"):
        compile_groups(mixed)


def test_le_rescaled_per_known_bound():
    rule = Rule("x_ms_bucket", "x_seconds_bucket", "s", {"le": "le"}, le_divisor=1000.0, le_bounds=(5, 2500))
    sel = "x_ms_bucket{le=~"
    assert operand(rule) == (
        f"max by (le, {BY}) (("
        f'label_replace({sel}"5|5\\\\.0"}}, "le", "0.005", "", "")'
        f' or label_replace({sel}"2500|2500\\\\.0"}}, "le", "2.5", "", "")'
        f' or label_replace({sel}"(?i)[+]?inf"}}, "le", "+Inf", "", "")) < Inf > -Inf)'
    )


def test_kept_le_integer_spellings_become_floats_and_renames():
    rule = Rule("h_bucket", "t_bucket", "knative", {"code": "status_code", "le": "le"})
    assert operand(rule) == (
        f"max by (status_code, le, {BY}) (label_replace(label_replace(h_bucket, "
        '"le", "${1}.0", "le", "(-?[0-9]{1,6})") < Inf > -Inf, "status_code", "$1", "code", "(.*)"))'
    )


def test_keep_all_reads_the_exposed_name_and_drops_agent_labels():
    rule = Rule("baseten_gpu_utilization", "baseten_gpu_utilization", labels=None, divisor=100.0)
    assert operand(rule, {"baseten_gpu_utilization"}) == (
        f"max without ({WITHOUT}) (sm_exposed:baseten_gpu_utilization < Inf > -Inf) / 100.0"
    )
    assert _rule("passthrough", "baseten_gpu_utilization", "").expr == operand(rule, exposed_names())


def test_engine_alias_new_name_beats_old():
    rule = _rule("engines", "vllm:kv_cache_usage_perc", "vllm")
    assert rule.expr == (
        f"max without ({WITHOUT}) (sm_exposed:vllm:kv_cache_usage_perc < Inf > -Inf)"
        f" or max without ({WITHOUT}) (vllm:gpu_cache_usage_perc < Inf > -Inf)"
    )


def test_llm_rules_add_constant_labels_and_yield_to_the_native_series():
    """Running and waiting requests are ``state`` children of ``baseten_llm_num_requests`` (``or`` keeps
    both: their label sets differ), recorded only where the replica has no native series."""
    rule = _rule("llm", "baseten_llm_num_requests", "vllm")
    state = 'label_replace(vllm:num_requests_{0} < Inf > -Inf, "state", "{0}", "", "")'
    running = f"max without ({WITHOUT}) ({state.format('running')})"
    waiting = f"max without ({WITHOUT}) ({state.format('waiting')})"
    native = f"max without ({WITHOUT}) (sm_exposed:baseten_llm_num_requests < Inf > -Inf)"
    assert rule.expr == f"({running} or {waiting}) unless on (model_id, deployment_id, replica) ({native})"
    kept = Rule("x", "t", "s", {"a": "a"}, constant=(("state", "on"),))
    assert operand(kept) == f'max by (a, state, {BY}) (label_replace(x < Inf > -Inf, "state", "on", "", ""))'


def test_matchers_escape_and_odd_names_use_the_name_matcher():
    rule = Rule("a.b", "t", "s", {}, (LabelMatch("path", 'a\\d"x'),))
    assert operand(rule) == f'max by ({BY}) ({{__name__="a.b",path=~"a\\\\d\\"x"}} < Inf > -Inf)'
    assert quote('say "hi"\\') == '"say \\"hi\\"\\\\"'


@pytest.mark.parametrize(
    ("bound", "regex"),
    [(5, "5|5\\.0"), (0.5, "0\\.5"), (100000, "100000|100000\\.0"), (1e6, "1000000|1000000\\.0|1e\\+06")],
)
def test_le_spellings(bound, regex):
    assert le_spellings(bound) == regex


def test_exposed_names_are_the_inputs_that_are_also_outputs():
    names = exposed_names()
    assert "baseten_gpu_utilization" in names and "vllm:kv_cache_usage_perc" in names
    assert "baseten_time_to_first_byte_seconds_bucket" in names
    assert not [n for n in names if n.startswith(("DCGM_", "container_", "vllm:gpu_cache"))]
    relabel = exposed_relabel_config()
    assert relabel["replacement"] == EXPOSED_PREFIX + "${1}" and relabel["target_label"] == "__name__"
    assert "|baseten_gpu_utilization|" in relabel["regex"]


def test_every_table_rule_is_compiled_into_its_group():
    groups = {g.name: g for g in compile_groups()}
    assert list(groups) == [f"servemetrics_{a}" for a in ADAPTERS if a not in AGENT_UNSCRAPABLE]
    exposed = exposed_names()
    for adapter, rules in ADAPTERS.items():
        if adapter in AGENT_UNSCRAPABLE:
            continue
        for rule in rules:
            [rec] = [
                r
                for r in groups[f"servemetrics_{adapter}"].rules
                if (r.record, r.source)
                == (
                    rule.target,
                    rule.source,
                )
            ]
            assert operand(rule, exposed) in rec.expr


def test_not_compilable_rules_say_what_to_fix():
    with pytest.raises(NotCompilableError, match="le_bounds"):
        operand(Rule("x_bucket", "y_bucket", "s", {"le": "le"}, le_divisor=1000.0))
    with pytest.raises(NotCompilableError, match="own new name"):
        operand(Rule("x", "y", "s", {"a": "b", "b": "c"}))
    clash = {"one": (Rule("a", "t", "s"),), "two": (Rule("b", "t", "s"),)}
    with pytest.raises(NotCompilableError, match="both make t with source='s'"):
        compile_groups(clash)


def test_durations():
    assert [prometheus_duration(s) for s in (15, 1, 0.5, 90, 2.25)] == ["15s", "1s", "500ms", "90s", "2250ms"]
    assert rule_file(30)["groups"][0]["interval"] == "30s"
    assert "interval" not in rule_file()["groups"][0]


def test_differences_are_pinned_and_documented():
    assert list(DIFFERENCES) == [
        "engine_passthrough",
        "kubelet_summary",
        "created_zeros",
        "up",
        "collapse",
        "priority_window",
        "preference_window",
        "timestamps",
        "le_spellings",
        "le_unknown_bounds",
        "label_clash",
        "custom_metrics",
    ]
    page = (REPO_ROOT / "docs" / "recording-rules.md").read_text()
    assert [k for k in DIFFERENCES if f"`{k}`" not in page] == []


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "servemetrics.yml"
    path.write_text(text)
    return path


def test_cli_prints_the_rule_file(tmp_path):
    result = CliRunner().invoke(
        cli.app, ["rules", "--config", str(_config(tmp_path, "scrape_interval: 30s\n"))]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == render(30.0)
    doc = yaml.safe_load(result.stdout)
    assert doc == rule_file(30.0)
    assert {g["interval"] for g in doc["groups"]} == {"30s"}


def test_cli_bad_config_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(
        cli.app, ["rules", "--config", str(_config(tmp_path, "scrape_interval: soon\n"))]
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "scrape_interval" in result.stderr and "not a duration" in result.stderr
    assert "Traceback" not in result.stderr


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed (scripts/install installs Debian's package)")
    pytest.skip(f"{name} is not installed")


def test_promtool_accepts_the_rule_file(tmp_path):
    promtool = _binary("promtool")
    path = tmp_path / "rules.yml"
    path.write_text(render(15.0))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g.rules) for g in compile_groups())} rules found" in done.stdout


def test_vmalert_accepts_the_rule_file(tmp_path):
    vmalert = _binary("vmalert")
    path = tmp_path / "rules.yml"
    path.write_text(render(15.0))
    done = subprocess.run([vmalert, "-dryRun", f"-rule={path}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
