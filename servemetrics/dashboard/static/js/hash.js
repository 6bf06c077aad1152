// The page's address: `#/metrics?model=m1&scope=environment:production&range=7d` or
// `#/gpu-usage?group_by=model&range=24h`. Read at start (deep links, the benchmark), rewritten on change.

export function readHash() {
  const raw = location.hash.replace(/^#/, "") || "/metrics";
  const [path, q] = raw.split("?");
  return { page: path === "/gpu-usage" ? "gpu" : "metrics", params: Object.fromEntries(new URLSearchParams(q || "")) };
}

export function writeHash(page, params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const hash = `#/${page === "gpu" ? "gpu-usage" : "metrics"}${q.toString() ? `?${q}` : ""}`;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}
