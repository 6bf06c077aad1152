// The Events overlay: a marker on every graph at each event's time (a dashed line and a focusable flag);
// hovering or focusing a flag shows the event's kind, time, deployment, environment and details, with
// old -> new values. One overlay object is shared by all graphs through a uPlot plugin.

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
  ENVIRONMENT_UPDATED: "#db2777",
};

const show = (v) => (v === null || v === undefined ? "none" : typeof v === "object" ? JSON.stringify(v) : String(v));
const words = (key) => key.replace(/_/g, " ");

// details -> ["percent: 25", "status: ACTIVE → INACTIVE", "min_replica: 1 → 2", ...]
export function detailLines(details) {
  const d = { ...(details || {}) };
  const out = [];
  if (d.old && d.new && typeof d.old === "object" && typeof d.new === "object") {
    for (const key of new Set([...Object.keys(d.old), ...Object.keys(d.new)])) {
      if (show(d.old[key]) !== show(d.new[key])) out.push(`${words(key)}: ${show(d.old[key])} → ${show(d.new[key])}`);
    }
    delete d.old;
    delete d.new;
  }
  for (const key of Object.keys(d)) {
    if (key.startsWith("old_") && `new_${key.slice(4)}` in d) {
      out.push(`${words(key.slice(4))}: ${show(d[key])} → ${show(d[`new_${key.slice(4)}`])}`);
      delete d[`new_${key.slice(4)}`];
      delete d[key];
    }
  }
  if ("previous_deployment_id" in d) {
    out.push(`previous deployment: ${show(d.previous_deployment_id)}`);
    delete d.previous_deployment_id;
  }
  for (const [key, v] of Object.entries(d)) out.push(`${words(key)}: ${show(v)}`);
  return out;
}

export function eventText(ev, titles) {
  const lines = [
    titles[ev.kind] || ev.kind,
    formatTime(ev.epoch_millis),
    `deployment: ${ev.deployment_id ?? "none"}`,
    `environment: ${ev.environment ?? "none"}`,
    ...detailLines(ev.details),
  ];
  return lines;
}

export function createOverlay(tooltip) {
  let events = [];
  let titles = {};
  const charts = new Set();

  function showTip(flag, ev) {
    tooltip.replaceChildren(
      ...eventText(ev, titles).map((text, i) => {
        const p = document.createElement(i === 0 ? "strong" : "div");
        p.textContent = text;
        return p;
      }),
    );
    tooltip.hidden = false;
    const r = flag.getBoundingClientRect();
    const left = Math.min(window.innerWidth - tooltip.offsetWidth - 8, r.left + window.scrollX + 12);
    tooltip.style.left = `${Math.max(8, left)}px`;
    tooltip.style.top = `${r.bottom + window.scrollY + 6}px`;
  }
  const hideTip = () => (tooltip.hidden = true);

  function draw(u) {
    let layer = u.over.querySelector(".event-layer");
    if (!layer) {
      layer = document.createElement("div");
      layer.className = "event-layer";
      u.over.append(layer);
    }
    layer.replaceChildren();
    const [lo, hi] = [u.scales.x.min, u.scales.x.max];
    for (const ev of events) {
      if (ev.epoch_millis < lo || ev.epoch_millis > hi) continue;
      const marker = document.createElement("div");
      marker.className = "event-marker";
      marker.dataset.kind = ev.kind;
      marker.style.left = `${u.valToPos(ev.epoch_millis, "x")}px`;
      marker.style.borderColor = COLORS[ev.kind] || "#111827";
      const flag = document.createElement("button");
      flag.type = "button";
      flag.className = "event-flag";
      flag.style.background = COLORS[ev.kind] || "#111827";
      flag.setAttribute("aria-label", eventText(ev, titles).join(", "));
      flag.addEventListener("mouseenter", () => showTip(flag, ev));
      flag.addEventListener("focus", () => showTip(flag, ev));
      flag.addEventListener("mouseleave", hideTip);
      flag.addEventListener("blur", hideTip);
      marker.append(flag);
      layer.append(marker);
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
