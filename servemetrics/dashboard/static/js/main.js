// Start-up: sign-in with an API key (kept in localStorage), the three pages (#/metrics, #/model-apis,
// #/gpu-usage) and
// the error handling they share: a 401 anywhere signs out and shows the sign-in again with the API's
// message; any other error shows the API's text where it happened.

import { AuthError, createClient } from "./api.js";
import { createGpuPage } from "./gpu-page.js";
import { readHash } from "./hash.js";
import { createMetricsPage } from "./metrics-page.js";
import { createModelApiPage } from "./model-api-page.js";
import * as storage from "./storage.js";

const $ = (id) => document.getElementById(id);
let client = null;
let started = {};

function onError(err, showError) {
  if (err instanceof AuthError) {
    signOut(`Your API key was not accepted (it may have expired or been revoked): ${err.message}. Sign in again.`);
    return;
  }
  showError(err.message || String(err));
}

const metrics = createMetricsPage({ getClient: () => client, onError });
const gpu = createGpuPage({ getClient: () => client, onError });
const modelApis = createModelApiPage({ getClient: () => client, onError });
// page -> [its <main>, its nav link, its error box, its status line, the page]
const PAGES = {
  metrics: ["metrics-page", "nav-metrics", "error", "status", metrics],
  "model-apis": ["mapi-page", "nav-mapi", "mapi-error", "mapi-status", modelApis],
  gpu: ["gpu-page", "nav-gpu", "gpu-error", "gpu-status", gpu],
};

function showSignIn(message) {
  $("app").hidden = true;
  $("signin").hidden = false;
  const msg = $("signin-message");
  msg.hidden = !message;
  msg.textContent = message || "";
  $("signin-key").value = "";
  $("signin-key").focus();
}

function signOut(message) {
  storage.clearKey();
  client = null;
  metrics.stop();
  modelApis.stop();
  started = {};
  showSignIn(message);
}

function route() {
  if (!client) return;
  const { page, params } = readHash();
  for (const [name, [main, nav]] of Object.entries(PAGES)) {
    $(main).hidden = name !== page;
    $(nav).setAttribute("aria-current", name === page ? "page" : "false");
  }
  const [, , errorBox, statusLine, current] = PAGES[page];
  const fail = (err) => onError(err, (text) => {
    $(errorBox).hidden = false;
    $(errorBox).textContent = `The API answered: ${text}`;
    $(statusLine).textContent = "";
  });
  // only the shown page refreshes itself
  if (page !== "metrics") metrics.stop();
  if (page !== "model-apis") modelApis.stop();
  if (!started[page]) {
    started[page] = true;
    current.init(params).catch(fail);
  } else if (current.resume) {
    current.resume();
  }
}

function start(key) {
  client = createClient(key);
  $("signin").hidden = true;
  $("app").hidden = false;
  route();
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = $("signin-key").value.trim();
  if (!key) return;
  storage.setKey(key);
  start(key);
});
$("signout").addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", route);

window.smDashboard = { metrics, gpu, modelApis };
const saved = storage.getKey();
if (saved) start(saved);
else showSignIn("");
