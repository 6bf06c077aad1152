// One uPlot chart per panel: lines for each label set, gaps where the API returned null (spanGaps off),
// a dot for a lone value between gaps (a line needs two points: uPlot's points filter draws it),
// a crosshair synced across every graph, live legend values at the hovered time, units on the axis, and
// "≥ bound" for a quantile clamped at its histogram's highest finite bucket bound; a "Split by" select
// in the header when the panel's metrics accept a drill-down split (split.js).

import { axisTicks, axisUnit, formatTime, formatValue, unitOf } from "./format.js";
import { SPLITS } from "./split.js";

export const PALETTE = ["#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];
const NAMED = { "2xx": "#16a34a", "4xx": "#d97706", "5xx": "#dc2626", avg: "#6b7280" };
export const SYNC_KEY = "servemetrics";
const HEIGHT = 200;

export function colorOf(line, i) {
  return NAMED[line.name] || PALETTE[i % PALETTE.length];
}

// The text of one value: "≥ 2.5 s" when a quantile equals its metric's highest finite bound.
export function valueText(v, line, unit, bounds) {
  if (v === null || v === undefined) return "—";
  const bound = line.quantile ? bounds[line.metric.name] : undefined;
  if (bound !== undefined && bound !== null && Math.abs(v - bound) <= 1e-9 * Math.max(1, Math.abs(bound))) {
    return `≥ ${formatValue(bound, unit)}`;
  }
  return formatValue(v, unit);
}

const pad = (n) => String(n).padStart(2, "0");
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// The caption of a y axis whose ticks are `splits`: the axis' one unit where it depends on the values
// (ms or s, KiB ... GiB), else the unit's label ("requests per 30 s", "%", "cores").
export function captionOf(unit, splits) {
  if (!["seconds", "bytes", "mebibytes"].includes(unit.type)) return unit.label;
  return axisUnit(unit, Math.max(0, ...splits.map((v) => Math.abs(v)))).suffix;
}

// x ticks: "14:30" within a day, "Jan 3 14:30" over longer ranges (local time).
export function timeTick(ms, spanMs) {
  const d = new Date(ms);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return spanMs <= 86_400_000 ? hm : `${MONTHS[d.getMonth()]} ${d.getDate()} ${hm}`;
}

// -> [indices] of the values of `ys` with no value on either side (null or the end), null when none.
export function isolated(ys) {
  const none = (v) => v === null || v === undefined;
  const out = [];
  for (let i = 0; i < ys.length; i++) {
    if (!none(ys[i]) && (i === 0 || none(ys[i - 1])) && (i + 1 === ys.length || none(ys[i + 1]))) out.push(i);
  }
  return out.length ? out : null;
}

// uPlot points filter: every point when uPlot shows them anyway (sparse data), else only the lone ones.
const lonePoints = (u, si, show) => (show ? null : isolated(u.data[si]));

// The y axis' width in CSS px: its longest tick text as drawn, plus the ticks and the gap (at least 50), so
// "0.002 cores" or "1.5 GiB" is never cut at the left edge (a fixed 78 px clipped the longer ones).
function yAxisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size; // settled: keep it, uPlot stops re-measuring
  const longest = (values || []).reduce((a, v) => (String(v).length > a.length ? String(v) : a), "");
  u.ctx.font = axis.font[0];
  const text = longest ? u.ctx.measureText(longest).width / devicePixelRatio : 0;
  return Math.ceil(Math.max(50, text + axis.ticks.size + axis.gap + 4));
}

// y tick steps: powers of two for byte sizes (so ticks read 512 MiB, 1 GiB), uPlot's defaults otherwise.
const POW2 = Array.from({ length: 60 }, (_, i) => 2 ** i);
function unitIncrs(unit) {
  return unit.type === "bytes" || unit.type === "mebibytes" ? POW2 : undefined;
}

// A labelled select of a graph's header: `options` [[text, value]], calling onChange(value) on a change.
function headerSelect(text, className, ariaLabel, options, value, onChange) {
  const label = document.createElement("label");
  label.className = "split";
  label.textContent = text;
  const select = document.createElement("select");
  select.className = className;
  select.setAttribute("aria-label", ariaLabel);
  select.append(...options.map(([t, v]) => new Option(t, v)));
  select.value = value || "";
  select.addEventListener("change", () => onChange(select.value));
  label.append(select);
  return label;
}

// split: {options: ["replica", ...], value: "" | option, onChange(value)} -> the header's select, or null.
function splitSelect(panel, split) {
  if (!split || !split.options.length) return null;
  const options = [["None", ""], ...split.options.map((o) => [SPLITS[o], o])];
  return headerSelect("Split by ", "split-by", `Split ${panel.title} by`, options, split.value, split.onChange);
}

// show: {value: "" | "total", onChange(value)} -> the header's "Show" select (per step / running total),
// offered on graphs of COUNT counters (series.js totalable), or null.
function showSelect(panel, show) {
  if (!show) return null;
  const options = [["Per step", ""], ["Running total", "total"]];
  return headerSelect("Show ", "show-as", `Show ${panel.title} as`, options, show.value, show.onChange);
}

// The unit of `data`'s graph: a running total's caption reads "restarts in total", not "per 1 min".
function unitOfData(data, stepSeconds) {
  const unit = unitOf(data.lines[0].metric, stepSeconds);
  return data.total ? { ...unit, label: unit.label.replace(/ per .+$/, " in total"), perStep: false } : unit;
}

function card(panel, unit, split, show) {
  const section = document.createElement("section");
  section.className = "graph card";
  section.dataset.panel = panel.id;
  section.setAttribute("aria-labelledby", `graph-${panel.id}-title`);
  const header = document.createElement("header");
  const h = document.createElement("h2");
  h.id = `graph-${panel.id}-title`;
  h.textContent = panel.title;
  const caption = document.createElement("span");
  caption.className = "unit";
  caption.textContent = unit.label;
  header.append(h, ...[splitSelect(panel, split), showSelect(panel, show)].filter(Boolean), caption);
  const chart = document.createElement("div");
  chart.className = "chart";
  chart.setAttribute("role", "img");
  section.append(header, chart);
  if (panel.help.length) section.title = panel.help.join("\n");
  return { section, chart, caption };
}

// -> {section, update(data, ctx), destroy()}; ctx: {stepSeconds, bounds, start, end, plugins, onDraw, split, show}
export function createGraph(parent, panel, data, ctx) {
  let unit = unitOfData(data, ctx.stepSeconds);
  const { section, chart, caption } = card(panel, unit, ctx.split, ctx.show);
  parent.append(section);
  const describe = () =>
    chart.setAttribute("aria-label", `${panel.title} (${unit.label}): ${data.lines.map((l) => l.name).join(", ")}`);
  describe();
  const yTicks = (splits, incr) => {
    caption.textContent = captionOf(unit, splits);
    return axisTicks(splits, unit, incr);
  };
  const opts = {
    width: Math.max(280, chart.clientWidth || parent.clientWidth || 600),
    height: HEIGHT,
    ms: 1,
    cursor: { sync: { key: SYNC_KEY, setSeries: false }, focus: { prox: 16 } },
    focus: { alpha: 0.4 },
    scales: {
      x: { time: true, range: () => [ctx.start, ctx.end] },
      y: { range: (u, min, max) => [Math.min(0, min ?? 0), max > 0 ? max * 1.08 : 1] },
    },
    series: [
      { label: "Time", value: (u, v) => (v === null ? "—" : formatTime(v)) },
      ...data.lines.map((line, i) => ({
        label: line.name,
        stroke: colorOf(line, i),
        width: 1.5,
        dash: line.stat ? [5, 4] : undefined,
        spanGaps: false,
        points: { size: 5, filter: lonePoints },
        value: (u, v) => valueText(v, line, unit, ctx.bounds),
      })),
    ],
    axes: [
      { space: 70, values: (u, splits) => splits.map((v) => timeTick(v, ctx.end - ctx.start)) },
      { size: yAxisSize, incrs: unitIncrs(unit), values: (u, splits, ai, space, incr) => yTicks(splits, incr) },
    ],
    legend: { live: true },
    hooks: { draw: [(u) => ctx.onDraw && ctx.onDraw(panel.id, u)] },
    plugins: ctx.plugins || [],
  };
  const u = new uPlot(opts, [data.x, ...data.ys], chart);
  const resize = new ResizeObserver(() => {
    const w = Math.max(280, chart.clientWidth);
    if (Math.abs(w - u.width) > 2) u.setSize({ width: w, height: HEIGHT });
  });
  resize.observe(chart);
  return {
    section,
    uplot: u,
    lineNames: () => data.lines.map((l) => l.name),
    // same lines: new values in place (auto-refresh keeps the crosshair and the legend)
    canUpdate: (next) =>
      Boolean(next.total) === Boolean(data.total) &&
      next.lines.map((l) => l.name).join("|") === data.lines.map((l) => l.name).join("|"),
    update(next, nextCtx) {
      Object.assign(ctx, nextCtx);
      data = next;
      unit = unitOfData(data, ctx.stepSeconds);
      caption.textContent = unit.label;
      describe();
      u.setData([data.x, ...data.ys]);
    },
    data: () => data,
    unit: () => unit,
    caption: () => caption.textContent,
    destroy() {
      resize.disconnect();
      u.destroy();
      section.remove();
    },
  };
}
