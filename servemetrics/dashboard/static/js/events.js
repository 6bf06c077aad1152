// The Events overlay: a marker on every graph at each event's time (a dashed line); events whose markers
// lie closer than CLUSTER_PX share one focusable flag (a cluster, the count written on it when more than
// one). Hovering or focusing a flag lists every event of its cluster: kind, time, deployment,
// environment and details, with old -> new values, each field once. One overlay object is shared by all
// graphs through a uPlot plugin.

import { formatTime } from "./format.js";

const COLORS = {
  DEPLOYED: "#2563eb",
  PROMOTED: "#7c3aed",
  PROMOTION_CONTROL: "#a855f7",
  AUTOSCALING_CHANGED: "#0891b2",
  ACTIVATED: "#16a34a",
  DEACTIVATED: "#6b7280",
  INSTANCE_TYPE_CHANGED: "#d97706",
  REPLICA_TERMINATED: "#dc2626",
  REPLICA_RECOVERED: "#059669",
  ENVIRONMENT_UPDATED: "#db2777",
};
export const CLUSTER_PX = 14; // markers closer than this (CSS pixels, about a flag's width) share a flag

const show = (v) => (v === null || v === undefined ? "none" : typeof v === "object" ? JSON.stringify(v) : String(v));
const words = (key) => key.replace(/_/g, " ");
const isObject = (v) => v !== null && typeof v === "object";

// The detail lines of one event as [label, text] pairs, before de-duplication.
function detailPairs(details) {
  const d = { ...(details || {}) };
  const out = [];
  const promotion = "previous_deployment_id" in d;
  if (isObject(d.new) && (isObject(d.old) || d.old === null)) {
    const old = d.old || {};
    for (const key of new Set([...Object.keys(old), ...Object.keys(d.new)])) {
      if (promotion && (key === "deployment_id" || key === "deployment_name")) continue; // lines below
      if (d.old === null) out.push([words(key), show(d.new[key])]); // created: its values
      else if (show(old[key]) !== show(d.new[key])) out.push([words(key), `${show(old[key])} → ${show(d.new[key])}`]);
    }
    delete d.old;
    delete d.new;
  }
  for (const key of Object.keys(d)) {
    if (key.startsWith("old_") && `new_${key.slice(4)}` in d) {
      out.push([words(key.slice(4)), `${show(d[key])} → ${show(d[`new_${key.slice(4)}`])}`]);
      delete d[`new_${key.slice(4)}`];
      delete d[key];
    }
  }
  if (promotion) {
    const name = d.previous_deployment_name;
    const named = name && name !== d.previous_deployment_id ? ` (${name})` : "";
    out.push(["previous deployment", `${show(d.previous_deployment_id)}${named}`]);
    delete d.previous_deployment_id;
    delete d.previous_deployment_name;
  }
  if (d.name !== undefined && d.name === d.deployment_name) delete d.name; // the same name twice
  for (const [key, v] of Object.entries(d)) out.push([words(key), show(v)]);
  return out;
}

// details -> ["percent: 25", "status: ACTIVE → INACTIVE", "min replica: 1 → 2", ...], each label once and
// none of `shown` ({label: text} already on the event's first lines, e.g. {"deployment id": "d1"}).
export function detailLines(details, shown = {}) {
  const seen = new Set(Object.keys(shown));
  const out = [];
  for (const [label, text] of detailPairs(details)) {
    if (seen.has(label)) continue;
    seen.add(label);
    out.push(`${label}: ${text}`);
  }
  return out;
}

// -> [title, time, "deployment: d1", "environment: production", ...details]: each field once (a detail
// repeating the event's deployment or environment is left out).
export function eventText(ev, titles) {
  const shown = {
    deployment: show(ev.deployment_id),
    "deployment id": show(ev.deployment_id),
    environment: show(ev.environment),
  };
  return [
    titles[ev.kind] || ev.kind,
    formatTime(ev.epoch_millis),
    `deployment: ${ev.deployment_id ?? "none"}`,
    `environment: ${ev.environment ?? "none"}`,
    ...detailLines(ev.details, shown),
  ];
}

// [{x (px), ev}] sorted by x -> [[{x, ev}, ...]]: a cluster takes every marker within CLUSTER_PX of its first.
export function clusters(placed) {
  const out = [];
  for (const p of placed) {
    const last = out[out.length - 1];
    if (last && p.x - last[0].x < CLUSTER_PX) last.push(p);
    else out.push([p]);
  }
  return out;
}

export function createOverlay(tooltip) {
  let events = [];
  let titles = {};
  const charts = new Set();

  function showTip(flag, group) {
    tooltip.replaceChildren(
      ...group.map((ev) => {
        const block = document.createElement("div");
        block.className = "tooltip-event";
        block.append(
          ...eventText(ev, titles).map((text, i) => {
            const p = document.createElement(i === 0 ? "strong" : "div");
            p.textContent = text;
            return p;
          }),
        );
        return block;
      }),
    );
    tooltip.hidden = false;
    const r = flag.getBoundingClientRect();
    const left = Math.min(window.innerWidth - tooltip.offsetWidth - 8, r.left + window.scrollX + 12);
    tooltip.style.left = `${Math.max(8, left)}px`;
    tooltip.style.top = `${r.bottom + window.scrollY + 6}px`;
  }
  const hideTip = () => (tooltip.hidden = true);

  function marker(x, ev) {
    const m = document.createElement("div");
    m.className = "event-marker";
    m.dataset.kind = ev.kind;
    m.style.left = `${x}px`;
    m.style.borderColor = COLORS[ev.kind] || "#111827";
    return m;
  }

  function flagOf(group) {
    const flag = document.createElement("button");
    flag.type = "button";
    flag.className = group.length > 1 ? "event-flag event-cluster" : "event-flag";
    flag.style.background = COLORS[group[0].kind] || "#111827";
    if (group.length > 1) flag.textContent = String(group.length);
    const texts = group.map((ev) => eventText(ev, titles).join(", "));
    flag.setAttribute("aria-label", group.length > 1 ? `${group.length} events: ${texts.join("; ")}` : texts[0]);
    flag.addEventListener("mouseenter", () => showTip(flag, group));
    flag.addEventListener("focus", () => showTip(flag, group));
    flag.addEventListener("mouseleave", hideTip);
    flag.addEventListener("blur", hideTip);
    return flag;
  }

  function draw(u) {
    let layer = u.over.querySelector(".event-layer");
    if (!layer) {
      layer = document.createElement("div");
      layer.className = "event-layer";
      u.over.append(layer);
    }
    layer.replaceChildren();
    const [lo, hi] = [u.scales.x.min, u.scales.x.max];
    const placed = events
      .filter((ev) => ev.epoch_millis >= lo && ev.epoch_millis <= hi)
      .map((ev) => ({ x: u.valToPos(ev.epoch_millis, "x"), ev }))
      .sort((a, b) => a.x - b.x);
    for (const group of clusters(placed)) {
      const markers = group.map(({ x, ev }) => marker(x, ev));
      markers[0].append(flagOf(group.map(({ ev }) => ev)));
      layer.append(...markers);
    }
  }

  return {
    plugin: () => ({
      hooks: {
        ready: [(u) => charts.add(u)],
        draw: [draw],
        destroy: [(u) => charts.delete(u)],
      },
    }),
    set(nextEvents, nextTitles) {
      events = nextEvents;
      titles = nextTitles || titles;
      hideTip();
      for (const u of charts) draw(u);
    },
    events: () => events,
  };
}
