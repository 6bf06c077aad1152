// The API client: every call the dashboard makes, with the key as `Authorization: Bearer <key>`.
// Errors: ApiError(status, message) with the API's own `{"error"}` text; AuthError for 401 (the page
// then shows the sign-in again). Times are epoch milliseconds, as the API takes them.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class AuthError extends ApiError {}

function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value === undefined || value === null) continue;
    for (const v of Array.isArray(value) ? value : [value]) q.append(name, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

// A call index.html started before the modules loaded (window.smEarly), taken once.
function early(url, key) {
  const e = window.smEarly;
  if (!e || e.key !== key || !(url in e.calls)) return null;
  const call = e.calls[url];
  delete e.calls[url];
  return call;
}

export function createClient(key) {
  async function get(path, params) {
    const url = path + query(params);
    let resp;
    try {
      resp = await (early(url, key) || fetch(url, { headers: { Authorization: `Bearer ${key}` } }));
    } catch (err) {
      throw new ApiError(0, `could not reach the service (${err.message}); is servemetrics running?`);
    }
    let body = null;
    try {
      body = await resp.json();
    } catch {
      body = null;
    }
    if (resp.ok) return body;
    const text = (body && body.error) || `HTTP ${resp.status} ${resp.statusText}`;
    if (resp.status === 401) throw new AuthError(401, text);
    throw new ApiError(resp.status, text);
  }

  const m = (id) => `/v1/models/${encodeURIComponent(id)}`;
  return {
    catalog: () => get("/v1/metrics_catalog"),
    models: () => get("/v1/models"),
    deployments: (model) => get(`${m(model)}/deployments`),
    environments: (model) => get(`${m(model)}/environments`),
    events: (model, start, end, kinds) =>
      get(`${m(model)}/events`, { start_epoch_millis: start, end_epoch_millis: end, kinds }),
    histogramBounds: (model, metrics) => get(`${m(model)}/histogram_bounds`, { metrics }),
    // the engines detected for a scope ({type: "environment" | "deployment", id})
    engines: (model, scope) =>
      get(`${m(model)}/engines`, scope.type === "environment" ? { environment: scope.id } : { deployment_id: scope.id }),
    // scope: {type: "environment" | "deployment", id}
    // groupBy: a drill-down split (replica, gpu, deployment, status_code; our extension) or undefined
    metrics: (model, scope, start, end, metrics, groupBy) => {
      const part = scope.type === "environment" ? "environments" : "deployments";
      return get(`${m(model)}/${part}/${encodeURIComponent(scope.id)}/metrics`, {
        mode: "SERIES",
        start_epoch_millis: start,
        end_epoch_millis: end,
        metrics,
        group_by: groupBy,
      });
    },
    // startup attempts and their summary (the Startup time card); more: filters, sort, limit, cursor
    startups: (model, scope, start, end, more) => {
      const part = scope.type === "environment" ? "environments" : "deployments";
      const path = `${m(model)}/${part}/${encodeURIComponent(scope.id)}/startups`;
      return get(path, { start_epoch_millis: start, end_epoch_millis: end, ...more });
    },
    startupSummary: (model, scope, start, end) => {
      const part = scope.type === "environment" ? "environments" : "deployments";
      const path = `${m(model)}/${part}/${encodeURIComponent(scope.id)}/startups/summary`;
      return get(path, { start_epoch_millis: start, end_epoch_millis: end });
    },
    // the organization's Model APIs ({items: [{name, display_name, ...}], pagination}); one page of 1000
    modelApis: () => get("/v1/model_apis", { limit: 1000 }),
    // a Model API's SERIES answer, every label set led by team_id; teams: [] = every team the key sees
    modelApiMetrics: (name, start, end, metrics, teams) =>
      get(`/v1/model_apis/${encodeURIComponent(name)}/metrics`, {
        mode: "SERIES",
        start_epoch_millis: start,
        end_epoch_millis: end,
        metrics,
        "team_ids[]": teams && teams.length ? teams : undefined,
      }),
    gpuUsage: (start, end, groupBy, gpuTypes) =>
      get("/v1/organization/gpu_usage", {
        start_epoch_millis: start,
        end_epoch_millis: end,
        group_by: groupBy,
        gpu_type: gpuTypes,
      }),
  };
}
