// The Model APIs tab (metrics-dashboard.md "Model APIs metrics"; docs/dashboard.md): pick one of the
// organization's Model APIs (GET /v1/model_apis), a time range (the Metrics tab's controls,
// range-controls.js) and a team filter; the graphs are the catalog's "Model APIs" group
// (panels.buildPanels(catalog, true): inference volume by status, incoming requests, rate limited
// requests, end-to-end response time, time to first token, request and response size, time per output
// token, decode tokens/s, total tokens), all from one SERIES call of GET /v1/model_apis/{name}/metrics.
// Its label sets lead with team_id, so each graph draws one line per team and label set ("team-a 2xx",
// "team-b p50", "no team output"), the 5 teams with the most drawn and the rest as "other (k)"
// (split.splitData with the "team" split). The team filter sends team_ids[] (none ticked: every team);
// its choices are the teams seen in this Model API's answers since the page opened. No events overlay:
// the spec gives Model APIs none. Units and formatting are the Metrics tab's (graphs.js, format.js).
// When every graph has drawn, #mapi-graphs gets data-render-state="done" and data-renders counts renders.

import { checkRow } from "./checks.js";
import { formatTime, stepLabel } from "./format.js";
import { createGraph } from "./graphs.js";
import { writeHash } from "./hash.js";
import { buildPanels } from "./panels.js";
import { createRangeControls } from "./range-controls.js";
import { nonNullCount } from "./series.js";
import { splitData } from "./split.js";
import * as storage from "./storage.js";

const $ = (id) => document.getElementById(id);
const RANGE_PREF = "modelApiRange";

export function createModelApiPage({ getClient, onError }) {
  const el = {
    name: $("mapi-name"),
    range: $("mapi-range"),
    status: $("mapi-status"),
    error: $("mapi-error"),
    info: $("mapi-window-info"),
    graphs: $("mapi-graphs"),
    teams: $("mapi-team-options"),
    teamReset: $("mapi-team-reset"),
  };
  const s = {
    panels: [],
    name: null,
    selected: new Set(), // ticked teams (team_ids[]); empty: every team
    known: new Set(), // teams seen in this Model API's answers
    answer: null,
    graphs: new Map(),
    seq: 0,
    renders: 0,
  };
  const range = createRangeControls(
    {
      range: el.range,
      custom: $("mapi-custom-range"),
      customStart: $("mapi-custom-start"),
      customEnd: $("mapi-custom-end"),
      apply: $("mapi-custom-apply"),
      autorefresh: $("mapi-autorefresh"),
      refresh: $("mapi-refresh"),
    },
    { load: () => load(), refresh: () => load({ quiet: true }), prefKey: RANGE_PREF },
  );

  const setStatus = (text) => (el.status.textContent = text);

  function showError(text) {
    el.error.hidden = !text;
    el.error.textContent = text ? `The API answered: ${text}` : "";
  }

  function syncHash() {
    writeHash("model-apis", { api: s.name, range: el.range.value, teams: [...s.selected].join(",") });
  }

  // every graph of the group (its rows are not default_visible: that hides them on a model's tab)
  const visiblePanels = () => s.panels;

  // -- the Model API and its teams ------------------------------------------------------------------

  async function init(params) {
    setStatus("Loading…");
    const client = getClient();
    const [catalog, list] = await Promise.all([client.catalog(), client.modelApis()]);
    s.panels = buildPanels(catalog, true);
    const apis = list.items || [];
    el.name.replaceChildren(
      ...apis.map((a) => new Option(a.display_name && a.display_name !== a.name ? `${a.display_name} (${a.name})` : a.name, a.name)),
    );
    range.restore(params.range);
    if (!apis.length) {
      setStatus("Your organization has no Model APIs yet: add one under model_apis in the config (docs/model-apis.md).");
      el.graphs.dataset.renderState = "empty";
      return;
    }
    const names = apis.map((a) => a.name);
    const saved = storage.getPrefs().modelApi;
    const teams = (params.teams || "").split(",").filter(Boolean);
    selectApi([params.api, saved].find((n) => names.includes(n)) || names[0], teams);
  }

  function selectApi(name, teams = []) {
    s.name = name;
    el.name.value = name;
    storage.setPrefs({ modelApi: name });
    s.selected = new Set(teams);
    s.known = new Set(teams);
    s.answer = null;
    buildTeamFilter();
    return load();
  }

  // One box per team seen (team "" has none: keys without a team are not a team_ids[] value).
  function buildTeamFilter() {
    const teams = [...s.known].filter(Boolean).sort();
    el.teams.replaceChildren(...teams.map((t) => checkRow("mapi-team", t, t, s.selected, () => load())));
    el.teamReset.disabled = s.selected.size === 0;
  }

  // -- loading and drawing --------------------------------------------------------------------------

  async function load({ quiet = false } = {}) {
    if (!s.name) return;
    const seq = ++s.seq;
    const win = range.startLoad({ graphs: el.graphs, setStatus, showError, syncHash }, quiet);
    if (!win) return;
    const names = [...new Set(visiblePanels().flatMap((p) => p.metrics.map((m) => m.name)))];
    try {
      const answer = await getClient().modelApiMetrics(s.name, win.start, win.end, names, [...s.selected]);
      if (seq !== s.seq) return;
      showError("");
      s.answer = answer;
      const before = s.known.size;
      for (const d of answer.metric_descriptors) for (const ls of d.label_sets) s.known.add(ls.team_id ?? "");
      if (s.known.size !== before || el.teamReset.disabled !== (s.selected.size === 0)) buildTeamFilter();
      render();
    } catch (err) {
      if (seq !== s.seq) return;
      el.graphs.setAttribute("aria-busy", "false");
      el.graphs.dataset.renderState = "error";
      setStatus("");
      onError(err, showError);
    }
  }

  function clearGraphs() {
    for (const g of s.graphs.values()) g.destroy();
    s.graphs.clear();
  }

  function finishRender() {
    s.renders += 1;
    el.graphs.dataset.renderState = "done";
    el.graphs.dataset.renders = String(s.renders);
  }

  function render() {
    const a = s.answer;
    const step = a.step_seconds;
    const shown = visiblePanels()
      .map((panel) => ({ panel, data: splitData(panel, a, "team") }))
      .filter(({ data }) => data.lines.length);
    el.info.textContent = `${formatTime(a.start_epoch_millis)} – ${formatTime(a.end_epoch_millis)}${step ? ` · one point per ${stepLabel(step)}` : ""}`;
    el.graphs.setAttribute("aria-busy", "false");
    if (!shown.some(({ data }) => nonNullCount(data.ys) > 0)) {
      clearGraphs();
      setStatus("No calls of this Model API in this time range (for these teams).");
      finishRender();
      el.graphs.dataset.renderState = "empty";
      return;
    }
    setStatus("");
    const pending = new Set(shown.map(({ panel }) => panel.id));
    const onDraw = (id) => {
      if (pending.delete(id) && !pending.size) finishRender();
    };
    const ctx = { stepSeconds: step, bounds: {}, start: a.start_epoch_millis, end: a.end_epoch_millis, onDraw };
    const sameOrder = [...s.graphs.keys()].join() === shown.map(({ panel }) => panel.id).join();
    if (sameOrder && shown.every(({ panel, data }) => s.graphs.get(panel.id).canUpdate(data))) {
      for (const { panel, data } of shown) s.graphs.get(panel.id).update(data, { ...ctx });
      return;
    }
    clearGraphs();
    el.graphs.dataset.renderState = "drawing";
    for (const { panel, data } of shown) s.graphs.set(panel.id, createGraph(el.graphs, panel, data, { ...ctx, plugins: [] }));
  }

  el.name.addEventListener("change", () => selectApi(el.name.value));
  el.teamReset.addEventListener("click", () => {
    s.selected.clear();
    buildTeamFilter();
    load();
  });

  return {
    init,
    stop: () => range.stop(),
    resume: () => s.name && load(),
    // for the browser tests: the answer's window and step, and what each graph holds, in page order
    inspect: () => ({
      name: s.name,
      start: s.answer?.start_epoch_millis,
      end: s.answer?.end_epoch_millis,
      step: s.answer?.step_seconds,
      teams: [...s.known].filter(Boolean).sort(),
      graphs: [...s.graphs.entries()].map(([id, g]) => {
        const d = g.data();
        const panel = s.panels.find((p) => p.id === id);
        return {
          id,
          title: panel.title,
          unit: g.caption(),
          lines: d.lines.map((l) => l.name),
          teams: d.lines.map((l) => (l.other ? null : l.labels.team_id)), // null: "other (k)"
          labels: d.lines.map((l) => l.rest),
          metrics: d.lines.map((l) => l.metric.name),
          x: d.x,
          ys: d.ys,
        };
      }),
    }),
    uplot: (id) => s.graphs.get(id)?.uplot,
  };
}
