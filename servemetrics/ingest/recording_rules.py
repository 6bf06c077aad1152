"""Compile the adapter table (``adapters.ADAPTERS``) to Prometheus recording rules.

At scale a Prometheus agent or vmagent scrapes the replicas (HTTP SD: ``/v1/service_discovery/targets``)
and the engine (Prometheus, or vmalert for VictoriaMetrics) evaluates these rules, which turn exporter
series into the canonical series ``adapt`` would have stored. One rule group per source adapter, one
recording rule per canonical sample name and ``source`` the adapter produces; each ``Rule`` row becomes
one operand::

    - record: <target>
      expr: max by (<kept labels>, <registry labels>) (
              label_replace(<match>{<where matchers>}, "<dst>", "$1", "<src>", "(.*)")  # one per rename
            ) / <divisor>
      labels: {source: <source>}

- Unkept labels go with ``max by``: ``adapt`` never sums two source series that become one canonical
  series (it keeps the first); ``max`` is equal when they are copies, ``sum`` would double them.
- A rule that keeps every label uses ``max without`` the agent's ``job`` and ``instance`` and the
  ``exported_<registry label>`` copies Prometheus makes of clashing exposed labels (ours are overridden).
- Priorities: operands producing one canonical name are joined by ``or`` in priority order (full label
  set matching: the higher-priority series wins where both give the same series, as in ``adapt``).
- Preferences (``Rule.preference``): views of one replica's container under other ``source``s (cAdvisor,
  kubelet resource metrics, the process collector) are not all recorded: a rule records its view
  ``unless on (model_id, deployment_id, replica)`` a rule of the same canonical name with a higher
  preference has a series for that replica; together the rules are ``best or on (...) next or on (...)
  ...``, highest preference first, the query layer's choice (``MetricDef.sources``).
- Renames of a rule that keeps every label (``Rule.rename``) are ``label_replace`` to the new name, and
  the old name goes with the ``max without``.
- Constant labels (``Rule.constant``) are set with ``label_replace(..., "<name>", "<value>", "", "")``.
- NaN and infinite samples are filtered out (``x < Inf > -Inf``), as the exposition parser drops them.
- ``le`` rescaling (``Rule.le_divisor``): PromQL cannot divide a label, so each of the source's known
  bounds (``Rule.le_bounds``) gets its own ``label_replace`` to the rescaled bound, written as ``adapt``
  writes it; kept ``le`` values written as integers (Go exporters: ``le="1"``) become ``"1.0"``.
- Source names that are also canonical names (passthrough ``baseten_*``, renamed engine names) are read
  as ``sm_exposed:<name>``: the agent's ``metric_relabel_configs`` (``exposed_relabel_config``) renames
  them, so a raw series and a recorded one never share a name and rules never read their own output.

What the table cannot express is in ``DIFFERENCES`` (docs/recording-rules.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from servemetrics.ingest.adapters import ADAPTERS, Rule, rules_for
from servemetrics.ingest.exposition import format_bound
from servemetrics.labels import TARGET_LABELS

EXPOSED_PREFIX = "sm_exposed:"
"""Prefix the agent gives scraped series whose name is also a recorded (canonical) name."""

REGISTRY_LABELS: tuple[str, ...] = (*TARGET_LABELS, "node_id")
"""Labels the scrape config attaches from the registry (HTTP SD; ``node_id`` for trainer nodes)."""

AGENT_LABELS: tuple[str, ...] = ("job", "instance")
"""Labels the agent adds to every scraped series that ``adapt`` never sees."""

REPLICA_LABELS: tuple[str, ...] = ("model_id", "deployment_id", "replica")
"""The labels of one replica: a preferred view suppresses the lower ones ``on`` these."""

AGENT_UNSCRAPABLE: frozenset[str] = frozenset({"kubelet_summary"})
"""Adapters whose input an agent cannot scrape (the kubelet Summary API is JSON): no group."""

DIFFERENCES: dict[str, str] = {
    "engine_passthrough": "Every vllm:* / sglang:* sample is stored by `adapt` under its own name with "
    "source=vllm|sglang; a recording rule needs a fixed name, so only renamed engine names "
    "(engines.ALIASES) are recorded. Other engine series stay in the engine as scraped: with job and "
    "instance, without source.",
    "kubelet_summary": "The kubelet Summary API is JSON, which an agent cannot scrape: no ephemeral-storage "
    "series from it (node_exporter's filesystem series still map).",
    "created_zeros": "Our scraper writes a 0 sample 1 ms after the previous scrape for a counter series "
    "new in a target; Prometheus 2.42 does not, so a new series' first increments are not counted.",
    "up": "`up` is written by the agent itself, with job and instance (host:port, not the URL); "
    "no rule records it.",
    "collapse": "When two source series of one target become one canonical series (labels dropped), "
    "`adapt` keeps the first in exposition order, the rules the largest value.",
    "priority_window": "Priorities are decided per timestamp by `adapt`, per evaluation by the rules "
    "(a series counts while within the engine's lookback, 5 minutes, and not marked stale).",
    "preference_window": "A replica's preferred container view (Rule.preference) is chosen per value set "
    "by the query layer, per evaluation by the rules (a higher view counts while within the engine's "
    "lookback, 5 minutes, and not marked stale); `adapt` stores every view.",
    "timestamps": "Recorded samples carry the rule evaluation's time, not the scrape's, one per "
    "group interval (the config's scrape_interval).",
    "le_spellings": 'Kept le values are rewritten only from integer spellings (le="5" -> "5.0"); '
    'other spellings that `adapt` normalises ("5.00", "5e0") stay as exposed.',
    "le_unknown_bounds": "A rescaled histogram's buckets outside the rule's le_bounds are dropped "
    "(`adapt` rescales any bound).",
    "label_clash": "An exposed label named like an agent label (job, instance) is kept by `adapt` under "
    "its name and appears as exported_<name> in the engine; an exposed label named like a registry label, "
    "on a target without that label, is dropped by `adapt` (unless the rule keeps all labels) and kept "
    "by the rules.",
    "custom_metrics": "`adapt` keeps a replica target's unmapped series as custom metrics (source=custom, "
    "up to custom_series_limit per scrape); no rule records them: in the engine they stay as scraped, "
    "with job and instance and without source, and the metrics API does not answer them by name.",
}
"""Where the recording rules knowingly differ from ``adapt`` (a test pins the keys)."""

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_INF_PATTERN = r"(?i)[+]?inf"
_INTEGER_LE = r"(-?[0-9]{1,6})"
FINITE = " < Inf > -Inf"
"""Filter appended to every source selection: ``adapt`` drops NaN and infinite samples (the parser does)."""


class NotCompilableError(ValueError):
    """A ``Rule`` (or a combination of rules) the compiler cannot turn into PromQL; says which and why."""


@dataclass(frozen=True)
class RecordingRule:
    """One Prometheus recording rule: ``record`` (a canonical sample name) = PromQL ``expr``, with the
    static label ``source`` (``""``: none, the passthrough keeps the exposed labels)."""

    record: str
    expr: str
    source: str = ""


@dataclass(frozen=True)
class RuleGroup:
    """The recording rules of one source adapter (``name`` = ``servemetrics_<adapter>``)."""

    name: str
    rules: tuple[RecordingRule, ...]


def quote(text: str) -> str:
    """A PromQL double-quoted string literal of ``text`` (backslash and quote escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def exposed_names(adapters: Mapping[str, tuple[Rule, ...]] = ADAPTERS) -> tuple[str, ...]:
    """Source names that are also recorded names, sorted: the agent renames them ``sm_exposed:<name>``."""
    rules = [r for _, adapter_rules in _all_rules(adapters) for r in adapter_rules]
    recorded = {r.target for r in rules}
    return tuple(sorted({r.match for r in rules} & recorded))


def exposed_relabel_config(adapters: Mapping[str, tuple[Rule, ...]] = ADAPTERS) -> dict[str, Any]:
    """The ``metric_relabel_configs`` entry the agent's scrape config needs (see ``EXPOSED_PREFIX``)."""
    names = "|".join(re.escape(n) for n in exposed_names(adapters))
    return {
        "source_labels": ["__name__"],
        "regex": f"({names})",
        "target_label": "__name__",
        "replacement": EXPOSED_PREFIX + "${1}",
    }


def _all_rules(adapters: Mapping[str, tuple[Rule, ...]]) -> list[tuple[str, list[Rule]]]:
    """Per adapter (table order, unscrapable ones left out), its rules plus the engine passthrough rules
    ``rules_for`` adds for a renamed engine name (``adapt`` keeps the new name under itself, also when
    another rule adapts that name to the ``baseten_llm_*`` set)."""
    kept = {r.match for rules in adapters.values() for r in rules if r.match == r.target}
    out = []
    for adapter, rules in adapters.items():
        if adapter in AGENT_UNSCRAPABLE:
            continue
        extra = [
            r
            for target in dict.fromkeys(r.target for r in rules)
            if target not in kept
            for r in rules_for(target)
            if r.target == target
        ]
        out.append((adapter, [*rules, *extra]))
    return out


def _selector(rule: Rule, exposed: set[str], extra: str = "") -> str:
    name = EXPOSED_PREFIX + rule.match if rule.match in exposed else rule.match
    matchers = [f"{m.name}{'!~' if m.negate else '=~'}{quote(m.pattern)}" for m in rule.where]
    if extra:
        matchers.append(extra)
    if not _NAME.match(name):
        return "{" + ",".join([f"__name__={quote(name)}", *matchers]) + "}"
    return name + ("{" + ",".join(matchers) + "}" if matchers else "")


def le_spellings(bound: float) -> str:
    """A regex of the ways exporters write bucket bound ``bound`` (Go ``5``, Python ``5.0``, ``1e+06``)."""
    forms = {format_bound(bound), repr(float(bound)), format(bound, "g")}
    if float(bound).is_integer():
        forms.add(str(int(bound)))
    return "|".join(re.escape(f) for f in sorted(forms))


def _keeps_le(rule: Rule) -> bool:
    return "le" in rule.labels if rule.labels is not None else rule.match.endswith("_bucket")


def _with_le(rule: Rule, exposed: set[str]) -> str:
    """The source series, finite values only, with ``le`` as ``adapt`` writes it (rescaled or normalised)."""
    if not _keeps_le(rule):
        return _selector(rule, exposed) + FINITE
    if rule.le_divisor == 1.0:
        normalised = (
            f'label_replace({_selector(rule, exposed)}, "le", "${{1}}.0", "le", {quote(_INTEGER_LE)})'
        )
        return normalised + FINITE
    if not rule.le_bounds:
        raise NotCompilableError(
            f"rule {rule.match} -> {rule.target} divides le by {rule.le_divisor:g} but lists no le_bounds; "
            "PromQL cannot divide a label: give the source's bucket bounds (Rule.le_bounds)"
        )
    parts = [
        f"label_replace({_selector(rule, exposed, 'le=~' + quote(le_spellings(b)))}, "
        f'"le", {quote(format_bound(b / rule.le_divisor))}, "", "")'
        for b in rule.le_bounds
    ]
    inf = _selector(rule, exposed, "le=~" + quote(_INF_PATTERN))
    parts.append(f'label_replace({inf}, "le", "+Inf", "", "")')
    return "(" + " or ".join(parts) + ")" + FINITE


def _renamed(rule: Rule, expr: str) -> str:
    renames = {src: dst for src, dst in (rule.labels or {}).items() if src != dst}
    clash = sorted(set(renames) & set(renames.values()))
    if clash or len(set((rule.labels or {}).values())) != len(rule.labels or {}):
        raise NotCompilableError(
            f"rule {rule.match} -> {rule.target}: labels {rule.labels} rename a label onto another "
            "source label or two labels onto one; give each kept label its own new name"
        )
    for src, dst in (*renames.items(), *rule.rename):
        expr = f'label_replace({expr}, {quote(dst)}, "$1", {quote(src)}, "(.*)")'
    return expr


def operand(rule: Rule, exposed: Iterable[str] = ()) -> str:
    """The PromQL of one ``Rule`` row: its canonical series with registry labels, without the ``source``
    label (the recording rule's static label adds it).

    ``exposed``: source names read as ``sm_exposed:<name>`` (``exposed_names``).
    Raises NotCompilableError for label renames PromQL cannot do in sequence or ``le`` rescaling
    without ``le_bounds``.
    """
    inner = _renamed(rule, _with_le(rule, set(exposed)))
    for name, value in rule.constant:
        inner = f'label_replace({inner}, {quote(name)}, {quote(value)}, "", "")'
    if rule.labels is None:
        renamed = [src for src, _ in rule.rename]  # kept under the new name only, as ``adapt`` does
        dropped = [*AGENT_LABELS, *(f"exported_{name}" for name in REGISTRY_LABELS), *renamed]
        expr = f"max without ({', '.join(dropped)}) ({inner})"
    else:
        constant = [name for name, _ in rule.constant]
        kept = list(dict.fromkeys([*rule.labels.values(), *constant, *REGISTRY_LABELS]))
        expr = f"max by ({', '.join(kept)}) ({inner})"
    if rule.divisor != 1.0:
        expr = f"{expr} / {rule.divisor!r}"
    return expr


def compile_groups(adapters: Mapping[str, tuple[Rule, ...]] = ADAPTERS) -> list[RuleGroup]:
    """One ``RuleGroup`` per source adapter (table order), one rule per canonical sample name and
    ``source`` it makes (first-appearance order).

    Raises NotCompilableError when a rule cannot be compiled, or when two adapters produce the same
    canonical name with the same ``source`` (their priorities could not be resolved across groups).
    """
    exposed = set(exposed_names(adapters))
    owner: dict[tuple[str, str], str] = {}
    groups = []
    every = _all_rules(adapters)
    by_name: dict[str, list[Rule]] = {}
    for _, rules in every:
        for rule in rules:
            by_name.setdefault(rule.target, []).append(rule)
    for adapter, rules in every:
        by_target: dict[tuple[str, str], list[Rule]] = {}
        for rule in rules:
            by_target.setdefault((rule.target, rule.source), []).append(rule)
            first = owner.setdefault((rule.target, rule.source), adapter)
            if first != adapter:
                raise NotCompilableError(
                    f"adapters {first} and {adapter} both make {rule.target} with source={rule.source!r}; "
                    "give one of them its own source"
                )
        recorded = []
        for (target, source), same in by_target.items():
            ordered = sorted(same, key=lambda r: -r.priority)  # stable: table order on ties
            expr = " or ".join(operand(r, exposed) for r in ordered)
            recorded.append(
                RecordingRule(target, _unless_preferred(expr, same, by_name[target], exposed), source)
            )
        groups.append(RuleGroup(f"servemetrics_{adapter}", tuple(recorded)))
    return groups


def _unless_preferred(expr: str, same: list[Rule], named: list[Rule], exposed: set[str]) -> str:
    """``expr`` (the rules ``same`` of one canonical name and source) recorded only for the replicas that
    no rule of that name with a higher ``preference`` (``named``: every rule of the name) has a series
    for, highest preference first."""
    preferences = {r.preference for r in same}
    if len(preferences) > 1:
        r = same[0]
        raise NotCompilableError(
            f"rules {r.match} ... -> {r.target} with source={r.source!r} have preferences "
            f"{sorted(preferences)}; one source is one view: give its rules one preference"
        )
    (mine,) = preferences
    higher = sorted((r for r in named if r.preference > mine), key=lambda r: -r.preference)
    if not higher:
        return expr
    better = " or ".join(operand(r, exposed) for r in higher)
    return f"({expr}) unless on ({', '.join(REPLICA_LABELS)}) ({better})"


def prometheus_duration(seconds: float) -> str:
    """``seconds`` as a Prometheus duration: ``15`` -> ``"15s"``, ``0.5`` -> ``"500ms"``."""
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _rule_entry(rule: RecordingRule) -> dict[str, Any]:
    entry: dict[str, Any] = {"record": rule.record, "expr": rule.expr}
    if rule.source:
        entry["labels"] = {"source": rule.source}
    return entry


def rule_file(interval_s: float | None = None) -> dict[str, Any]:
    """The Prometheus rule file as data: ``{"groups": [{"name", "interval"?, "rules": [...]}]}``.

    ``interval_s``: the groups' evaluation interval in seconds (the scrape interval); ``None`` leaves
    the engine's ``evaluation_interval``.
    """
    groups = []
    for group in compile_groups():
        entry: dict[str, Any] = {"name": group.name}
        if interval_s is not None:
            entry["interval"] = prometheus_duration(interval_s)
        entry["rules"] = [_rule_entry(r) for r in group.rules]
        groups.append(entry)
    return {"groups": groups}


def render(interval_s: float | None = None) -> str:
    """The rule file as YAML, with a header naming the scrape config it needs."""
    relabel = yaml.safe_dump([exposed_relabel_config()], sort_keys=False, width=10_000)
    header = [
        "# Prometheus recording rules generated by `servemetrics rules` from the adapter table.",
        "# Load them in the engine (Prometheus rule_files, or vmalert -rule for VictoriaMetrics).",
        "# The agent's scrape config needs these metric_relabel_configs (docs/recording-rules.md):",
        *(f"#   {line}" for line in relabel.splitlines()),
    ]
    body: str = yaml.safe_dump(rule_file(interval_s), sort_keys=False, width=10_000)
    return "\n".join(header) + "\n" + body
