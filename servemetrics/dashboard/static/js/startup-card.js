// The Startup time card (the spec's "Startup times"): for the page's model, scope and window, the
// summary of GET .../startups/summary (whole startups and each phase: mean, p50, p90, p95, p99) and the
// slowest recent attempts (GET .../startups?sort_by=DURATION, the first SLOWEST), each with its outcome
// and phases. Its own errors are shown in the card; they never stop the graphs.

import { formatTime } from "./format.js";

export const SLOWEST = 5;
const STATS = ["mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms"];

// 164500 -> "2m 44.5s", 950 -> "950 ms", null -> "–"
export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${+s.toFixed(1)}s`;
  return `${Math.floor(s / 60)}m ${+(s % 60).toFixed(1)}s`;
}

const words = (phase) => phase.charAt(0) + phase.slice(1).toLowerCase().replace(/_/g, " ");

function cell(tag, text) {
  const c = document.createElement(tag);
  c.textContent = text;
  return c;
}

function row(tag, texts) {
  const r = document.createElement("tr");
  r.append(...texts.map((t, i) => cell(i === 0 && tag === "td" ? "th" : tag, t)));
  return r;
}

function table(caption, head, rows) {
  const t = document.createElement("table");
  t.append(cell("caption", caption));
  const thead = document.createElement("thead");
  thead.append(row("th", head));
  const tbody = document.createElement("tbody");
  tbody.append(...rows.map((r) => row("td", r)));
  t.append(thead, tbody);
  return t;
}

// The summary table: one row for whole startups, one per recorded phase.
export function summaryRows(summary) {
  const line = (name, p) => [name, String(p.sample_count), ...STATS.map((k) => duration(p[k]))];
  return [
    line("Whole startup", summary.total_duration_ms),
    ...summary.phase_duration_ms.map((p) => line(words(p.phase), p.duration_ms)),
  ];
}

// The slowest attempts: replica, deployment, start, outcome, duration and the phases it went through.
export function attemptRows(page) {
  return page.items.map((a) => [
    a.replica_id || "–",
    a.deployment_name,
    formatTime(a.started_at_epoch_millis),
    a.outcome,
    duration(a.duration_ms),
    a.phase_summary.map((p) => `${words(p.phase)} ${p.status === "FAILED" ? "failed" : duration(p.duration_ms)}`).join(", "),
  ]);
}

export function createStartupCard(root) {
  const body = root.querySelector(".startup-body");
  let seq = 0;
  async function load(client, model, scope, win) {
    const mine = ++seq;
    root.dataset.renderState = "loading";
    try {
      const [summary, slowest] = await Promise.all([
        client.startupSummary(model, scope, win.start, win.end),
        client.startups(model, scope, win.start, win.end, { sort_by: "DURATION", direction: "desc", limit: SLOWEST }),
      ]);
      if (mine !== seq) return;
      const head = ["", "Startups", "Mean", "p50", "p90", "p95", "p99"];
      const parts = [table("Startup time", head, summaryRows(summary))];
      if (slowest.items.length) {
        const cols = ["Replica", "Deployment", "Started", "Outcome", "Duration", "Phases"];
        parts.push(table(`Slowest startups (${slowest.total_count} in the window)`, cols, attemptRows(slowest)));
      } else {
        parts.push(cell("p", "No replica started in this window."));
      }
      body.replaceChildren(...parts);
      root.dataset.renderState = "done";
    } catch (err) {
      if (mine !== seq) return;
      body.replaceChildren(cell("p", `Startup times are not available: ${err.message}`));
      root.dataset.renderState = "error";
    }
  }
  return { load };
}
