// The Metrics page: model picker, scope (an environment or one deployment), time range, auto-refresh,
// the graphs of the catalog's panels, Customize view and the Events overlay. One SERIES call fetches
// every visible panel's metrics; histogram bounds and events are fetched beside it. Engine graphs apply
// only where GET .../engines detects their engine for the scope: asked before the first SERIES call of
// a scope, then beside every later one (a change reloads). Graphs are drawn by group (the platform's,
// then "Engine", "LLM", each under its heading), in the layout's order inside a group.
// When every visible graph has drawn, #graphs gets data-render-state="done" and the page sets the
// performance mark "servemetrics:graphs-drawn" (the browser tests and bench/dashboard_bench.py wait for it).
// A graph split by replica / GPU / deployment / status code ("Split by", split.js) is fetched by a SERIES
// call of its own with group_by, beside the main one.

import { checkRow } from "./checks.js";
import { createCustomize } from "./customize.js";
import { createOverlay } from "./events.js";
import { formatTime, stepLabel } from "./format.js";
import { createGraph } from "./graphs.js";
import { writeHash } from "./hash.js";
import { buildPanels, byGroup, panelApplies, resolveLayout, toSaved } from "./panels.js";
import { createRangeControls } from "./range-controls.js";
import { nonNullCount, panelData, runningTotal, totalable } from "./series.js";
import { splitData, splitOptions } from "./split.js";
import { createStartupCard } from "./startup-card.js";
import * as storage from "./storage.js";

const $ = (id) => document.getElementById(id);

export function createMetricsPage({ getClient, onError }) {
  const el = {
    model: $("model"),
    scope: $("scope"),
    range: $("range"),
    status: $("status"),
    error: $("error"),
    info: $("window-info"),
    graphs: $("graphs"),
    eventsPanel: $("events-panel"),
    eventsButton: $("events-button"),
    eventsShow: $("events-show"),
    eventsKinds: $("events-kinds"),
  };
  const prefs = storage.getPrefs();
  const s = {
    catalog: null,
    panels: [],
    titles: {},
    model: null,
    scope: null,
    layout: null,
    answer: null,
    fetched: new Set(),
    bounds: {},
    graphs: new Map(),
    seq: 0,
    showEvents: Boolean(prefs.showEvents),
    kinds: null,
    renders: 0,
    engines: null, // Set of the engines detected for the scope; null until asked
    splits: new Map(), // panel id -> its "Split by" choice (none: not in the map)
    splitAnswers: new Map(), // panel id -> the group_by answer of its metrics
    totals: new Set(), // ids of the panels drawn as running totals ("Show": per step / running total)
  };
  const range = createRangeControls(
    {
      range: el.range,
      custom: $("custom-range"),
      customStart: $("custom-start"),
      customEnd: $("custom-end"),
      apply: $("custom-apply"),
      autorefresh: $("autorefresh"),
      refresh: $("refresh"),
    },
    { load: () => load(), refresh: () => load({ quiet: true }) },
  );
  const overlay = createOverlay($("tooltip"));
  const startupCard = createStartupCard($("startup-card"));
  const customize = createCustomize($("customize"), {
    onChange: (layout) => {
      s.layout = layout;
      storage.setLayout(s.model, toSaved(layout));
      const wanted = visibleMetricNames();
      if (wanted.every((n) => s.fetched.has(n))) render();
      else load();
    },
    onReset: () => {
      storage.clearLayout(s.model);
      s.layout = resolveLayout(s.panels, null);
      customize.update(applicablePanels(), s.layout, absentPanels());
      load();
      return s.layout;
    },
  });

  function setStatus(text) {
    el.status.textContent = text;
  }

  function showError(text) {
    el.error.hidden = !text;
    el.error.textContent = text ? `The API answered: ${text}` : "";
  }

  function applicablePanels() {
    const detected = s.engines || new Set();
    return s.panels.filter((p) => panelApplies(p, detected));
  }

  function visiblePanels() {
    const panels = applicablePanels();
    const known = new Set(panels.map((p) => p.id));
    const ids = s.layout.order.filter((id) => known.has(id) && !s.layout.hidden.has(id));
    return byGroup(panels, ids).map((id) => s.panels.find((p) => p.id === id));
  }

  function visibleMetricNames() {
    return [...new Set(visiblePanels().flatMap((p) => p.metrics.map((m) => m.name)))];
  }

  function absentPanels() {
    if (!s.answer) return new Set();
    const present = new Set(s.answer.metric_descriptors.map((d) => d.name));
    return new Set(
      applicablePanels()
        .filter((p) => p.metrics.every((m) => s.fetched.has(m.name) && !present.has(m.name)))
        .map((p) => p.id),
    );
  }

  function syncHash() {
    const scope = s.scope ? `${s.scope.type}:${s.scope.id}` : "";
    writeHash("metrics", { model: s.model, scope, range: el.range.value });
  }

  // -- catalog, models, scopes ------------------------------------------------------------------------

  async function init(params) {
    setStatus("Loading…");
    const client = getClient();
    // the model is usually known (address or last choice): ask for its scopes at the same time
    const guess = params.model || prefs.model;
    const scopes = guess ? fetchScopes(client, guess) : null;
    scopes?.catch(() => {}); // a stale guess: selectModel asks again
    const [catalog, models] = await Promise.all([client.catalog(), client.models()]);
    s.catalog = catalog;
    s.panels = buildPanels(catalog);
    s.titles = Object.fromEntries((catalog.event_kinds || []).map((k) => [k.kind, k.title]));
    buildKindFilter(prefs.kinds);
    el.model.replaceChildren(
      ...models.models.map((m) => new Option(m.name && m.name !== m.id ? `${m.name} (${m.id})` : m.id, m.id)),
    );
    range.restore(params.range);
    if (!models.models.length) {
      setStatus("Your organization has no models yet: add one (docs/management.md), then reload.");
      el.graphs.dataset.renderState = "empty";
      return;
    }
    const ids = models.models.map((m) => m.id);
    const model = [params.model, prefs.model].find((id) => ids.includes(id)) || ids[0];
    await selectModel(model, params.scope || prefs.scopes?.[model], model === guess ? scopes : null);
  }

  function fetchScopes(client, model) {
    return Promise.all([client.deployments(model), client.environments(model)]);
  }

  async function selectModel(model, wantedScope, prefetched = null) {
    s.model = model;
    el.model.value = model;
    storage.setPrefs({ model });
    s.fetched = new Set();
    s.answer = null;
    s.bounds = {};
    const [deps, envs] = await (prefetched || fetchScopes(getClient(), model));
    const envGroup = document.createElement("optgroup");
    envGroup.label = "Environments";
    envGroup.append(...envs.environments.map((e) => new Option(`Environment: ${e.name}`, `environment:${e.name}`)));
    const depGroup = document.createElement("optgroup");
    depGroup.label = "Deployments";
    depGroup.append(
      ...deps.deployments.map((d) => {
        const where = d.environment ? ` · ${d.environment}` : "";
        return new Option(`Deployment: ${d.id}${d.name && d.name !== d.id ? ` (${d.name})` : ""}${where}`, `deployment:${d.id}`);
      }),
    );
    el.scope.replaceChildren(...[envGroup, depGroup].filter((g) => g.children.length));
    const values = [...el.scope.querySelectorAll("option")].map((o) => o.value);
    const fallback = values.includes("environment:production") ? "environment:production" : values[0];
    el.scope.value = values.includes(wantedScope) ? wantedScope : fallback;
    s.layout = resolveLayout(s.panels, storage.getLayout(model));
    return setScope();
  }

  function setScope() {
    const value = el.scope.value;
    if (!value) {
      s.scope = null;
      setStatus("This model has no environment or deployment to show.");
      clearGraphs();
      el.graphs.dataset.renderState = "empty";
      return undefined;
    }
    const i = value.indexOf(":");
    s.scope = { type: value.slice(0, i), id: value.slice(i + 1) };
    s.engines = null;
    storage.setPrefs({ scopes: { ...(storage.getPrefs().scopes || {}), [s.model]: value } });
    s.fetched = new Set();
    return load();
  }

  // -- loading --------------------------------------------------------------------------------------

  function eventsWanted() {
    return s.showEvents && s.kinds.size > 0;
  }

  function inScope(ev) {
    if (!s.scope || s.scope.type === "environment") return true;
    const d = ev.details || {};
    return !ev.deployment_id || ev.deployment_id === s.scope.id || d.previous_deployment_id === s.scope.id;
  }

  async function fetchEvents(client, win) {
    if (!eventsWanted()) return [];
    const body = await client.events(s.model, win.start, win.end, [...s.kinds]);
    return body.events.filter(inScope);
  }

  async function load({ quiet = false } = {}) {
    if (!s.scope) return;
    const seq = ++s.seq;
    const win = range.startLoad({ graphs: el.graphs, setStatus, showError, syncHash }, quiet);
    if (!win) return;
    const client = getClient();
    startupCard.load(client, s.model, s.scope, win); // its errors stay in the card
    try {
      const enginesCall = client.engines(s.model, s.scope);
      if (s.engines === null) {
        const first = await enginesCall;
        if (seq !== s.seq) return;
        s.engines = new Set(first.engines);
      }
      const names = visibleMetricNames();
      const hist = names.filter((n) => s.catalog.metrics.find((m) => m.name === n)?.kind === "HISTOGRAM");
      const missingBounds = hist.filter((n) => !(n in s.bounds));
      const [answer, bounds, events, engines, splitAnswers] = await Promise.all([
        names.length ? client.metrics(s.model, s.scope, win.start, win.end, names) : null,
        missingBounds.length ? client.histogramBounds(s.model, missingBounds) : { bounds: {} },
        fetchEvents(client, win),
        enginesCall,
        fetchSplits(client, win),
      ]);
      if (seq !== s.seq) return;
      s.splitAnswers = splitAnswers;
      showError("");
      for (const n of missingBounds) s.bounds[n] = bounds.bounds?.[n] ?? null;
      s.answer = answer || emptyAnswer(win);
      s.fetched = new Set(names);
      s.window = { start: s.answer.start_epoch_millis, end: s.answer.end_epoch_millis };
      overlay.set(events, s.titles);
      const detected = new Set(engines.engines);
      const changed = detected.size !== s.engines.size || [...detected].some((e) => !s.engines.has(e));
      s.engines = detected;
      render();
      if (changed) load({ quiet: true }); // detection moved on (cached for minutes): the graphs follow
    } catch (err) {
      if (seq !== s.seq) return;
      el.graphs.setAttribute("aria-busy", "false");
      el.graphs.dataset.renderState = "error";
      setStatus("");
      onError(err, showError);
    }
  }

  // -> Map(panel id -> answer) of the visible split graphs: one group_by call per graph.
  async function fetchSplits(client, win) {
    const split = visiblePanels().filter((p) => s.splits.has(p.id));
    const names = (p) => p.metrics.map((m) => m.name);
    const answers = await Promise.all(
      split.map((p) => client.metrics(s.model, s.scope, win.start, win.end, names(p), s.splits.get(p.id))),
    );
    return new Map(split.map((p, i) => [p.id, answers[i]]));
  }

  function setSplit(panelId, value) {
    if (value) s.splits.set(panelId, value);
    else s.splits.delete(panelId);
    load();
  }

  function setShow(panelId, value) {
    if (value === "total") s.totals.add(panelId);
    else s.totals.delete(panelId);
    render();
  }

  function dataOf(panel, answer) {
    const split = s.splitAnswers.get(panel.id);
    const data = split && s.splits.has(panel.id) ? splitData(panel, split, s.splits.get(panel.id)) : panelData(panel, answer);
    return s.totals.has(panel.id) && totalable(panel, answer.step_seconds) ? runningTotal(data) : data;
  }

  function emptyAnswer(win) {
    return {
      start_epoch_millis: win.start,
      end_epoch_millis: win.end,
      step_seconds: null,
      metric_descriptors: [],
      metric_values: [],
    };
  }

  async function reloadEvents() {
    storage.setPrefs({ showEvents: s.showEvents, kinds: [...s.kinds] });
    if (!s.window) return;
    try {
      overlay.set(await fetchEvents(getClient(), s.window), s.titles);
    } catch (err) {
      onError(err, showError);
    }
  }

  // -- rendering ------------------------------------------------------------------------------------

  function clearGraphs() {
    for (const g of s.graphs.values()) g.destroy();
    s.graphs.clear();
    for (const h of el.graphs.querySelectorAll(".group-heading")) h.remove();
  }

  function groupHeading(group) {
    const h = document.createElement("h2");
    h.className = "group-heading";
    h.dataset.group = group;
    h.textContent = group;
    return h;
  }

  function render() {
    const a = s.answer;
    const step = a.step_seconds;
    const shown = [];
    for (const panel of visiblePanels()) {
      const data = dataOf(panel, a);
      if (data.lines.length) shown.push({ panel, data });
    }
    const withData = shown.filter(({ data }) => nonNullCount(data.ys) > 0);
    customize.update(applicablePanels(), s.layout, absentPanels());
    const from = formatTime(a.start_epoch_millis);
    const to = formatTime(a.end_epoch_millis);
    el.info.textContent = `${from} – ${to}${step ? ` · one point per ${stepLabel(step)}` : ""}`;
    el.graphs.setAttribute("aria-busy", "false");
    if (!withData.length) {
      clearGraphs();
      setStatus("No data for this scope in this time range.");
      finishRender();
      el.graphs.dataset.renderState = "empty";
      return;
    }
    setStatus("");
    const pending = new Set(shown.map(({ panel }) => panel.id));
    const onDraw = (id) => {
      if (!pending.delete(id) || pending.size) return;
      finishRender();
    };
    const ctx = () => ({ stepSeconds: step, bounds: s.bounds, start: a.start_epoch_millis, end: a.end_epoch_millis, onDraw });
    const sameOrder = [...s.graphs.keys()].join() === shown.map(({ panel }) => panel.id).join();
    if (sameOrder && shown.every(({ panel, data }) => s.graphs.get(panel.id).canUpdate(data))) {
      for (const { panel, data } of shown) s.graphs.get(panel.id).update(data, ctx());
      return;
    }
    clearGraphs();
    el.graphs.dataset.renderState = "drawing";
    let group = "";
    for (const { panel, data } of shown) {
      if (panel.group && panel.group !== group) el.graphs.append(groupHeading(panel.group));
      group = panel.group;
      const split = { options: splitOptions(panel), value: s.splits.get(panel.id), onChange: (v) => setSplit(panel.id, v) };
      const show = totalable(panel, step) ? { value: s.totals.has(panel.id) ? "total" : "", onChange: (v) => setShow(panel.id, v) } : null;
      s.graphs.set(panel.id, createGraph(el.graphs, panel, data, { ...ctx(), split, show, plugins: [overlay.plugin()] }));
    }
  }

  function finishRender() {
    s.renders += 1;
    el.graphs.dataset.renderState = "done";
    el.graphs.dataset.renders = String(s.renders);
    performance.mark("servemetrics:graphs-drawn");
  }

  // -- controls -------------------------------------------------------------------------------------

  function buildKindFilter(saved) {
    const kinds = s.catalog.event_kinds || [];
    s.kinds = new Set(saved && saved.length ? saved.filter((k) => kinds.some((x) => x.kind === k)) : kinds.map((k) => k.kind));
    el.eventsShow.checked = s.showEvents;
    const rows = kinds.map(({ kind, title }) => {
      const row = checkRow("event-kind", kind, title, s.kinds, reloadEvents);
      row.querySelector("input").disabled = !s.showEvents;
      return row;
    });
    el.eventsKinds.replaceChildren(el.eventsKinds.querySelector("legend"), ...rows);
  }

  el.model.addEventListener("change", () => selectModel(el.model.value).catch((e) => onError(e, showError)));
  el.scope.addEventListener("change", () => setScope());
  el.eventsButton.addEventListener("click", () => {
    const open = el.eventsPanel.hidden;
    el.eventsPanel.hidden = !open;
    el.eventsButton.setAttribute("aria-expanded", String(open));
    if (open) el.eventsShow.focus();
  });
  el.eventsShow.addEventListener("change", () => {
    s.showEvents = el.eventsShow.checked;
    for (const box of el.eventsKinds.querySelectorAll("input")) box.disabled = !s.showEvents;
    reloadEvents();
  });
  $("customize-button").addEventListener("click", () => {
    if (s.layout) customize.open(applicablePanels(), s.layout, absentPanels());
  });

  return {
    init,
    stop: () => range.stop(),
    resume: () => s.scope && load(),
    // for the browser tests: what each graph holds, in page order
    inspect: () =>
      [...s.graphs.entries()].map(([id, g]) => {
        const d = g.data();
        return {
          id,
          title: s.panels.find((p) => p.id === id).title,
          group: s.panels.find((p) => p.id === id).group,
          unit: g.caption(),
          lines: d.lines.map((l) => l.name),
          x: d.x,
          ys: d.ys,
          nonNull: d.ys.map((y) => y.filter((v) => v !== null).length),
        };
      }),
    events: () => overlay.events(),
    uplot: (id) => s.graphs.get(id)?.uplot,
  };
}
