// Units and labels: how a value of the API is shown (axis ticks, hover values, legends). Times are
// 24-hour clock everywhere (formatTime; graphs.js timeTick).
// Unit hints are the spec's (SECONDS, BYTES, MEBIBYTES, PER_SECOND, COUNT, RATIO) and the platform SDK's
// CELSIUS (GPU temperature) and WATTS (GPU power); a PER_SECOND clock (a *_hertz name) is shown in MHz;
// COUNT counters are
// totals per step ("requests per 30 s"), RATIO gauges are fractions shown as %, RATIO counters are
// CPU-seconds per second shown as cores (docs/catalog.md); token counts and speeds say "tokens".

const BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

// A number for a person: 3 significant digits at most, k / M above 10,000, a leading zero below 1
// ("0.003", never ".003" or "3e-3"), no trailing zeros.
export function num(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e6) return trim((v / 1e6).toFixed(a >= 1e8 ? 0 : 2)) + " M";
  if (a >= 1e4) return trim((v / 1e3).toFixed(a >= 1e5 ? 0 : 1)) + " k";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return trim(v.toFixed(1));
  if (a >= 0.01) return trim(v.toFixed(2));
  return trim(v.toFixed(Math.min(20, 1 - Math.floor(Math.log10(a))))); // 2 significant digits
}

function trim(s) {
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

export function stepLabel(seconds) {
  if (!seconds) return "step";
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

function noun(name) {
  if (name.includes("token")) return "tokens";
  if (name.includes("restart")) return "restarts";
  if (name.includes("webhook")) return "webhook requests";
  if (name.includes("request")) return "requests";
  return "count";
}

// -> {type, label, perStep}: type picks the formatter, label is the graph's unit caption; perStep is true
// for COUNT counters, whose values are totals per step (series.js scales a shorter value set to the step).
export function unitOf(metric, stepSeconds) {
  const { name, kind, unit_hint: hint } = metric;
  switch (hint) {
    case "SECONDS":
      return { type: "seconds", label: "seconds" }; // graphs.js captions the axis' own unit: ms or s
    case "BYTES":
      return { type: "bytes", label: "bytes" };
    case "MEBIBYTES":
      return { type: "mebibytes", label: "bytes" };
    case "PER_SECOND":
      if (name.endsWith("_hertz")) return { type: "hertz", label: "MHz" };
      if (name.includes("token")) return { type: "rate", label: "tokens/s" };
      return name.includes("request") ? { type: "rate", label: "req/s" } : { type: "rate", label: "per second" };
    case "CELSIUS":
      return { type: "celsius", label: "°C" };
    case "WATTS":
      return { type: "watts", label: "W" };
    case "RATIO":
      if (kind === "COUNTER") return name.includes("cpu") ? { type: "cores", label: "cores" } : { type: "rate", label: "per second" };
      return { type: "percent", label: "%" };
    default:
      if (/temperature|celsius/.test(name)) return { type: "celsius", label: "°C" };
      if (kind === "COUNTER") return { type: "count", label: `${noun(name)} per ${stepLabel(stepSeconds)}`, perStep: true };
      return { type: "count", label: name.includes("replica") ? "replicas" : noun(name) };
  }
}

export function bytes(v) {
  let i = 0;
  let x = Math.abs(v);
  while (x >= 1024 && i < BINARY.length - 1) {
    x /= 1024;
    i += 1;
  }
  return `${num(Math.sign(v) * x)} ${BINARY[i]}`;
}

export function formatValue(v, unit) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  switch (unit.type) {
    case "seconds":
      return Math.abs(v) < 1 ? `${num(v * 1000)} ms` : `${num(v)} s`;
    case "bytes":
      return bytes(v);
    case "mebibytes":
      return bytes(v * 1048576);
    case "percent":
      return `${num(v * 100)} %`;
    case "cores":
      return `${num(v)} ${num(v) === "1" ? "core" : "cores"}`;
    case "celsius":
      return `${num(v)} °C`;
    case "watts":
      return `${num(v)} W`;
    case "hertz":
      return `${num(v / 1e6)} MHz`;
    case "rate":
      if (unit.label === "req/s") return `${num(v)} req/s`;
      if (unit.label === "tokens/s") return `${num(v)} tok/s`; // short enough for the axis
      return `${num(v)}/s`;
    default:
      return num(v);
  }
}

// -> {div, suffix}: the one unit of a y axis whose largest tick is `max` (absolute): a tick value v
// reads v / div followed by suffix. Seconds are ms when every tick is under 1 s; sizes take the binary
// unit of the largest tick; counts and rates take k or M from 10,000 on (as num does).
export function axisUnit(unit, max) {
  const mag = (suffix) => {
    const [div, pre] = max >= 1e6 ? [1e6, "M"] : max >= 1e4 ? [1e3, "k"] : [1, ""];
    return { div, suffix: [pre, suffix].filter(Boolean).join(" ") };
  };
  switch (unit.type) {
    case "seconds":
      return max < 1 ? { div: 0.001, suffix: "ms" } : { div: 1, suffix: "s" };
    case "bytes":
    case "mebibytes": {
      const per = unit.type === "mebibytes" ? 1048576 : 1;
      let i = 0;
      while (i < BINARY.length - 1 && max * per >= 1024 ** (i + 1)) i += 1;
      return { div: 1024 ** i / per, suffix: BINARY[i] };
    }
    case "percent":
      return { div: 0.01, suffix: "%" };
    case "cores":
      return { div: 1, suffix: "cores" };
    case "celsius":
      return { div: 1, suffix: "°C" };
    case "watts":
      return mag("W");
    case "hertz":
      return { div: 1e6, suffix: "MHz" };
    case "rate":
      return mag(unit.label === "req/s" ? "req/s" : unit.label === "tokens/s" ? "tok/s" : "/s");
    default:
      return mag("");
  }
}

// Decimals that write every multiple of `incr` exactly (0.25 -> 2, 5 -> 0), at most 10.
function decimalsOf(incr) {
  for (let k = 0; k < 10; k++) {
    const x = incr * 10 ** k;
    if (Math.abs(x - Math.round(x)) < 1e-6 * Math.max(1, x)) return k;
  }
  return 10;
}

// y axis ticks -> their texts, all in one unit (axisUnit of the largest) with the same decimals (from
// uPlot's tick increment `incr`, in the unit's values): [0, 0.25, 0.5] s -> "0", "250 ms", "500 ms".
export function axisTicks(splits, unit, incr) {
  const max = Math.max(0, ...splits.map((v) => Math.abs(v)));
  const { div, suffix } = axisUnit(unit, max);
  const k = decimalsOf(Math.abs(incr || 1) / div);
  return splits.map((v) => {
    if (v === 0) return "0";
    const text = (v / div).toFixed(k);
    return suffix.startsWith("/") ? `${text}${suffix}` : suffix ? `${text} ${suffix}` : text;
  });
}

export function labelSetName(labels) {
  const entries = Object.entries(labels || {});
  if (entries.length === 0) return "";
  return entries
    .map(([k, v]) => (k === "quantile" ? `p${Math.round(Number(v) * 100)}` : String(v)))
    .join(" ");
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

export function formatTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// For <input type="datetime-local">: local time without seconds.
export function toLocalInput(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
