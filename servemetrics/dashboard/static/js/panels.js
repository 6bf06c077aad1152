// Graphs from the catalog: one panel per catalog `panel`, in catalog order; each label set of each of
// its metrics is a line (named by `legend` and the label set: "p50", "2xx", "avg", "active").
// Layout (order and hidden panels) is applied on top: saved per model, else the catalog's defaults.
// Each panel has the `group` of its metrics ("" for the platform's, "Engine", "LLM": shown under a
// heading, groups in catalog order) and the `engines` that make it apply ([] = every scope; else it
// applies only where GET .../engines detected one of them).

import { labelSetName } from "./format.js";

export function panelId(title) {
  return title.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}

function lineName(metric, labels, metricsInPanel, title) {
  const set = labelSetName(labels);
  const legend = metric.legend || "";
  if (!set) return legend || title;
  return metricsInPanel > 1 && legend ? `${legend} ${set}` : set;
}

// The catalog group of the Model API metrics (catalog/model_apis.py): graphed on a Model API's own tab,
// never on a model's Metrics tab (docs/model-apis.md).
export const MODEL_API_GROUP = "Model APIs";

// catalog.metrics -> [{id, title, help, metrics, lines: [{metric, labels, name, quantile}], defaultVisible}]
// `modelApis`: false (a model's tab) leaves the Model API group out, true keeps only it.
export function buildPanels(catalog, modelApis = false) {
  const byId = new Map();
  for (const metric of catalog.metrics) {
    if ((metric.group === MODEL_API_GROUP) !== modelApis) continue;
    const title = metric.panel || metric.name;
    const id = panelId(title);
    if (!byId.has(id)) {
      byId.set(id, { id, title, help: [], metrics: [], defaultVisible: false, group: metric.group || "" });
    }
    const panel = byId.get(id);
    panel.metrics.push(metric);
    if (metric.help) panel.help.push(metric.help);
    panel.defaultVisible = panel.defaultVisible || metric.default_visible !== false;
  }
  for (const panel of byId.values()) {
    const everywhere = panel.metrics.some((m) => !(m.engines || []).length);
    panel.engines = everywhere ? [] : [...new Set(panel.metrics.flatMap((m) => m.engines))];
    panel.lines = panel.metrics.flatMap((metric) =>
      (metric.label_sets.length ? metric.label_sets : [{}]).map((labels) => ({
        metric,
        labels,
        name: lineName(metric, labels, panel.metrics.length, panel.title),
        quantile: labels.quantile !== undefined,
        stat: labels.stat !== undefined,
      })),
    );
  }
  return [...byId.values()];
}

// True when the panel applies to a scope whose detected engines are `detected` (a Set).
export function panelApplies(panel, detected) {
  return !panel.engines.length || panel.engines.some((e) => detected.has(e));
}

// The panel ids `ids` (of `panels`) with each group together, groups in catalog order, the order of
// `ids` kept inside a group.
export function byGroup(panels, ids) {
  const groups = [...new Set(panels.map((p) => p.group))];
  const groupOf = new Map(panels.map((p) => [p.id, p.group]));
  return groups.flatMap((g) => ids.filter((id) => groupOf.get(id) === g));
}

// -> {order: [ids], hidden: Set(ids)} for these panels, from a saved layout or the defaults.
export function resolveLayout(panels, saved) {
  const ids = panels.map((p) => p.id);
  if (!saved) {
    return { order: ids, hidden: new Set(panels.filter((p) => !p.defaultVisible).map((p) => p.id)) };
  }
  const known = new Set(ids);
  const order = (saved.order || []).filter((id) => known.has(id));
  for (const id of ids) if (!order.includes(id)) order.push(id); // panels new to the catalog
  const savedIds = new Set(saved.order || []);
  const hidden = new Set((saved.hidden || []).filter((id) => known.has(id)));
  for (const p of panels) if (!savedIds.has(p.id) && !p.defaultVisible) hidden.add(p.id);
  return { order, hidden };
}

export function toSaved(layout) {
  return { order: [...layout.order], hidden: [...layout.hidden] };
}
