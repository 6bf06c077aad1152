// A SERIES answer -> the data of one panel: x = each value set's start (epoch ms), one y array per line.
// `null` stays null (a gap in the graph, never 0). A metric the answer omits has no series for the
// scope: its lines are left out, and a panel with none is not shown.

const sameLabels = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

export function panelData(panel, answer) {
  const x = answer.metric_values.map((vs) => vs.start_epoch_millis);
  const index = new Map(answer.metric_descriptors.map((d, i) => [d.name, i]));
  const lines = [];
  const ys = [];
  for (const line of panel.lines) {
    const di = index.get(line.metric.name);
    if (di === undefined) continue;
    const li = answer.metric_descriptors[di].label_sets.findIndex((ls) => sameLabels(ls, line.labels));
    if (li < 0) continue;
    lines.push(line);
    ys.push(answer.metric_values.map((vs) => {
      const v = vs.values[di][li];
      return v === null || v === undefined ? null : v;
    }));
  }
  return { x, lines, ys };
}

export const nonNullCount = (ys) => ys.reduce((n, y) => n + y.filter((v) => v !== null).length, 0);

