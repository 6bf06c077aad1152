// The organization GPU usage page: active GPUs (ready replicas x GPUs per replica) over time across
// every model of the organization, grouped by GPU type (default) or by model, with a GPU-type filter
// (Reset clears it) and a range up to 7 days. Reads GET /v1/organization/gpu_usage.

import { checkRow } from "./checks.js";
import { formatTime, num } from "./format.js";
import { PALETTE, timeTick } from "./graphs.js";
import { writeHash } from "./hash.js";
import { PRESETS } from "./range.js";

const $ = (id) => document.getElementById(id);
const HEIGHT = 300;

export function createGpuPage({ getClient, onError }) {
  const el = {
    group: $("gpu-group"),
    range: $("gpu-range"),
    options: $("gpu-filter-options"),
    reset: $("gpu-reset"),
    status: $("gpu-status"),
    error: $("gpu-error"),
    graph: $("gpu-graph"),
  };
  const s = { types: [], selected: new Set(), chart: null, answer: null, seq: 0 };

  function showError(text) {
    el.error.hidden = !text;
    el.error.textContent = text ? `The API answered: ${text}` : "";
  }

  function buildFilter(types) {
    s.types = types;
    el.options.replaceChildren(
      ...types.map((t) => checkRow("gpu-type", t, t, s.selected, load)),
    );
    el.reset.disabled = s.selected.size === 0;
  }

  function draw(a) {
    if (s.chart) s.chart.destroy();
    s.chart = null;
    el.graph.replaceChildren();
    const groups = a.groups.filter((g) => g.values.some((v) => v !== null));
    if (!groups.length) {
      el.status.textContent = "No GPUs were active in this time range.";
      el.graph.dataset.renderState = "empty";
      return;
    }
    el.status.textContent = "";
    const card = document.createElement("section");
    card.className = "graph card";
    card.setAttribute("aria-labelledby", "gpu-graph-title");
    const h = document.createElement("h2");
    h.id = "gpu-graph-title";
    h.textContent = `Active GPUs by ${a.group_by === "model" ? "model" : "GPU type"}`;
    const chart = document.createElement("div");
    chart.className = "chart";
    chart.setAttribute("role", "img");
    chart.setAttribute("aria-label", `Active GPUs: ${groups.map((g) => g.name || g.key).join(", ")}`);
    card.append(h, chart);
    el.graph.append(card);
    const opts = {
      width: Math.max(320, chart.clientWidth || 800),
      height: HEIGHT,
      ms: 1,
      scales: { x: { time: true, range: () => [a.start_epoch_millis, a.end_epoch_millis] }, y: { range: (u, min, max) => [0, max > 0 ? Math.ceil(max * 1.1) : 1] } },
      series: [
        { label: "Time", value: (u, v) => (v === null ? "—" : formatTime(v)) },
        ...groups.map((g, i) => ({
          label: g.name || g.key,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: false,
          value: (u, v) => (v === null ? "—" : `${num(v)} ${v === 1 ? "GPU" : "GPUs"}`),
        })),
      ],
      axes: [
        { space: 70, values: (u, splits) => splits.map((v) => timeTick(v, a.end_epoch_millis - a.start_epoch_millis)) },
        { size: 60, values: (u, splits) => splits.map((v) => num(v)) },
      ],
      hooks: { draw: [() => (el.graph.dataset.renderState = "done")] },
    };
    s.chart = new uPlot(opts, [a.timestamps, ...groups.map((g) => g.values)], chart);
  }

  async function load() {
    const seq = ++s.seq;
    const end = Date.now();
    const start = end - PRESETS[el.range.value];
    writeHash("gpu", { group_by: el.group.value, range: el.range.value });
    el.status.textContent = "Loading…";
    el.graph.dataset.renderState = "loading";
    try {
      const a = await getClient().gpuUsage(start, end, el.group.value, [...s.selected]);
      if (seq !== s.seq) return;
      showError("");
      s.answer = a;
      buildFilter(a.gpu_types || []);
      draw(a);
    } catch (err) {
      if (seq !== s.seq) return;
      el.status.textContent = "";
      el.graph.dataset.renderState = "error";
      onError(err, showError);
    }
  }

  el.group.addEventListener("change", load);
  el.range.addEventListener("change", load);
  el.reset.addEventListener("click", () => {
    s.selected.clear();
    load();
  });

  return {
    init(params) {
      if (params.group_by === "model" || params.group_by === "gpu_type") el.group.value = params.group_by;
      if (params.range in PRESETS) el.range.value = params.range;
      return load();
    },
    inspect: () => (s.answer ? { groups: s.answer.groups.map((g) => g.name || g.key), group_by: s.answer.group_by } : null),
  };
}
