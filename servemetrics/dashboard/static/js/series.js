// A SERIES answer -> the data of one panel: x = each value set's start (epoch ms), one y array per line.
// `null` stays null (a gap in the graph, never 0). A metric the answer omits has no series for the
// scope: its lines are left out, and a panel with none is not shown.
// COUNT counters are totals per value set, and a value set can be shorter than the step: one starts at
// every promotion inside a step, and the last one ends at the window's end (docs/query-semantics.md,
// "Value sets"). Their values are scaled to the step (total x step / the value set's length), so the
// graph reads "requests per 30 s" in every point and a steady load draws a flat line across a promotion.
// PER_SECOND and RATIO counters are divided by the value set's own seconds by the API already.

import { unitOf } from "./format.js";

const sameLabels = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

// answer -> [ms] the length of each value set: until the next one's start, the last until the window end.
export function valueSetLengths(answer) {
  const starts = answer.metric_values.map((vs) => vs.start_epoch_millis);
  return starts.map((t, i) => (i + 1 < starts.length ? starts[i + 1] : answer.end_epoch_millis) - t);
}

// -> [factor] per value set: step / length for a per-step total, 1 for everything else (or no step).
function scales(metric, answer, lengths) {
  const stepMs = (answer.step_seconds || 0) * 1000;
  if (!stepMs || !unitOf(metric, answer.step_seconds).perStep) return null;
  return lengths.map((ms) => (ms > 0 && ms < stepMs ? stepMs / ms : 1));
}

export function panelData(panel, answer) {
  const x = answer.metric_values.map((vs) => vs.start_epoch_millis);
  const index = new Map(answer.metric_descriptors.map((d, i) => [d.name, i]));
  const lengths = valueSetLengths(answer);
  const lines = [];
  const ys = [];
  for (const line of panel.lines) {
    const di = index.get(line.metric.name);
    if (di === undefined) continue;
    const li = answer.metric_descriptors[di].label_sets.findIndex((ls) => sameLabels(ls, line.labels));
    if (li < 0) continue;
    const scale = scales(line.metric, answer, lengths);
    lines.push(line);
    ys.push(answer.metric_values.map((vs, i) => {
      const v = vs.values[di][li];
      if (v === null || v === undefined) return null;
      return scale ? v * scale[i] : v;
    }));
  }
  return { x, lines, ys };
}

// A panel can be drawn as a running total when every metric of it is a COUNT counter, counted per step
// (restarts, requests, tokens: format.js perStep).
export const totalable = (panel, stepSeconds) => panel.metrics.every((m) => unitOf(m, stepSeconds).perStep);

// data -> the same lines as running totals from the window's start: each point is the sum of the steps up
// to it. A step without data stays null (a gap, not a flat line) and adds nothing; the total goes on after
// it. The sum of the per-step values is what the API's SUMMARY gives for the window.
export function runningTotal(data) {
  const ys = data.ys.map((y) => {
    let sum = 0;
    return y.map((v) => (v === null ? null : (sum += v)));
  });
  return { ...data, ys, total: true };
}

export const nonNullCount = (ys) => ys.reduce((n, y) => n + y.filter((v) => v !== null).length, 0);
