// The page's address: `#/metrics?model=m1&scope=environment:production&range=7d`,
// `#/model-apis?api=chat&range=1h&teams=team-a,team-b` or `#/gpu-usage?group_by=model&range=24h`. Read at
// start (deep links, the benchmark), rewritten on change.

const PATHS = { metrics: "/metrics", "model-apis": "/model-apis", gpu: "/gpu-usage" };

// -> {page: "metrics" | "model-apis" | "gpu", params: {name: value}}; an unknown path is the Metrics page.
export function readHash() {
  const raw = location.hash.replace(/^#/, "") || "/metrics";
  const [path, q] = raw.split("?");
  const page = Object.keys(PATHS).find((p) => PATHS[p] === path) || "metrics";
  return { page, params: Object.fromEntries(new URLSearchParams(q || "")) };
}

export function writeHash(page, params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const hash = `#${PATHS[page] || PATHS.metrics}${q.toString() ? `?${q}` : ""}`;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}
