// "Split by" (drill-down, our extension of the API: GET .../metrics?group_by=…, docs/query-semantics.md
// "Drill-down"): which splits a graph offers (those every metric of its panel accepts: the catalog's
// `group_by`), and a split answer -> the graph's lines. A split answer's label sets lead with the part's
// labels ({replica: "r1", status: "2xx"}); a line is one part x one catalog label set, named
// "r1 2xx" ("r1 GPU 0", "d2 p50"). Readable with many parts: the TOP_N parts with the most (the sum of
// their values over the window) are drawn, the rest become one "other (k)" line per label set: their
// sum for a sum-aggregated metric (so the lines still add up to the unsplit graph), their mean for a mean
// metric and for quantiles / avg ("other (k, mean)"), which do not add. Lines that are 0 or null in every
// step (a replica's 4xx and 5xx without errors) are left out, unless every line is.

import { panelData } from "./series.js";

// The "Split by" choices of a model's graphs. `team` is not one of them: a Model API's answers are always
// split by team (GET /v1/model_apis/{name}/metrics; the Model APIs tab draws them with splitData(…, "team")).
export const SPLITS = { replica: "Replica", gpu: "GPU", deployment: "Deployment", status_code: "Status code" };
export const SPLIT_LABELS = {
  replica: ["replica"],
  gpu: ["replica", "gpu"],
  deployment: ["deployment_id"],
  status_code: ["status_code"],
  team: ["team_id"],
};
export const NO_TEAM = "no team"; // the part name of team_id "" (keys without a team)
export const TOP_N = 5;

const NAME_OF = {
  replica: (ls) => ls.replica,
  gpu: (ls) => `${ls.replica} GPU ${ls.gpu}`,
  deployment: (ls) => ls.deployment_id,
  status_code: (ls) => ls.status_code,
  team: (ls) => ls.team_id || NO_TEAM,
};

// The splits `panel` offers, in SPLITS order.
export function splitOptions(panel) {
  return Object.keys(SPLITS).filter((s) => panel.metrics.every((m) => (m.group_by || []).includes(s)));
}

function restOf(labels, split) {
  return Object.fromEntries(Object.entries(labels).filter(([k]) => !SPLIT_LABELS[split].includes(k)));
}

function setName(rest) {
  return Object.entries(rest)
    .map(([k, v]) => (k === "quantile" ? `p${Math.round(Number(v) * 100)}` : String(v)))
    .join(" ");
}

function lineOf(panel, metric, labels, split) {
  const rest = restOf(labels, split);
  const legend = panel.metrics.length > 1 ? metric.legend || "" : "";
  const name = [legend, NAME_OF[split](labels), setName(rest)].filter(Boolean).join(" ");
  return { metric, labels, rest, part: NAME_OF[split](labels), name, quantile: "quantile" in rest, stat: "stat" in rest };
}

// answer -> [{metric, labels, rest, part, name, ...}] for every label set of the panel's metrics.
function allLines(panel, answer, split) {
  const wanted = new Map(panel.metrics.map((m) => [m.name, m]));
  return answer.metric_descriptors
    .filter((d) => wanted.has(d.name))
    .flatMap((d) => d.label_sets.map((ls) => lineOf(panel, wanted.get(d.name), ls, split)));
}

// -> part names, the largest first (sum of every value of the part's lines; ties by name).
function rankParts(lines, ys) {
  const total = new Map();
  lines.forEach((l, i) => total.set(l.part, (total.get(l.part) || 0) + ys[i].reduce((a, v) => a + Math.abs(v ?? 0), 0)));
  return [...total.keys()].sort((a, b) => total.get(b) - total.get(a) || a.localeCompare(b));
}

function combine(columns, sum) {
  return columns[0].map((_, i) => {
    const vals = columns.map((y) => y[i]).filter((v) => v !== null && v !== undefined);
    if (!vals.length) return null;
    const s = vals.reduce((a, v) => a + v, 0);
    return sum ? s : s / vals.length;
  });
}

// A split SERIES answer -> {x, lines, ys} of `panel` (as series.panelData), top `topN` parts + "other".
export function splitData(panel, answer, split, topN = TOP_N) {
  const all = panelData({ lines: allLines(panel, answer, split) }, answer);
  const ranked = rankParts(all.lines, all.ys);
  const top = new Set(ranked.length > topN + 1 ? ranked.slice(0, topN) : ranked);
  const lines = [];
  const ys = [];
  for (const part of ranked.filter((p) => top.has(p))) {
    all.lines.forEach((l, i) => {
      if (l.part !== part) return;
      lines.push(l);
      ys.push(all.ys[i]);
    });
  }
  const others = new Map(); // metric name + label set -> indices of the lines folded into "other"
  all.lines.forEach((l, i) => {
    if (top.has(l.part)) return;
    const key = `${l.metric.name}\u0000${JSON.stringify(l.rest)}`;
    if (!others.has(key)) others.set(key, []);
    others.get(key).push(i);
  });
  const k = ranked.length - top.size;
  for (const idx of others.values()) {
    const first = all.lines[idx[0]];
    const sum = first.metric.aggregation === "sum" && first.metric.kind !== "HISTOGRAM";
    const legend = panel.metrics.length > 1 ? first.metric.legend || "" : "";
    const name = [legend, sum ? `other (${k})` : `other (${k}, mean)`, setName(first.rest)].filter(Boolean).join(" ");
    lines.push({ ...first, part: "other", name, other: true });
    ys.push(combine(idx.map((i) => all.ys[i]), sum));
  }
  const keep = ys.map((y) => y.some((v) => v !== null && v !== 0));
  if (!keep.some(Boolean)) return { x: all.x, lines, ys };
  return { x: all.x, lines: lines.filter((_, i) => keep[i]), ys: ys.filter((_, i) => keep[i]) };
}
