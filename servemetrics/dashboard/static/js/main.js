// Start-up: sign-in with an API key (kept in localStorage), the two pages (#/metrics, #/gpu-usage) and
// the error handling they share: a 401 anywhere signs out and shows the sign-in again with the API's
// message; any other error shows the API's text where it happened.

import { AuthError, createClient } from "./api.js";
import { createGpuPage } from "./gpu-page.js";
import { readHash } from "./hash.js";
import { createMetricsPage } from "./metrics-page.js";
import * as storage from "./storage.js";

const $ = (id) => document.getElementById(id);
let client = null;
let started = { metrics: false, gpu: false };

function onError(err, showError) {
  if (err instanceof AuthError) {
    signOut(`Your API key was not accepted (it may have expired or been revoked): ${err.message}. Sign in again.`);
    return;
  }
  showError(err.message || String(err));
}

const metrics = createMetricsPage({ getClient: () => client, onError });
const gpu = createGpuPage({ getClient: () => client, onError });

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
  started = { metrics: false, gpu: false };
  showSignIn(message);
}

function route() {
  if (!client) return;
  const { page, params } = readHash();
  $("metrics-page").hidden = page !== "metrics";
  $("gpu-page").hidden = page !== "gpu";
  $("nav-metrics").setAttribute("aria-current", page === "metrics" ? "page" : "false");
  $("nav-gpu").setAttribute("aria-current", page === "gpu" ? "page" : "false");
  const fail = (err) => onError(err, (text) => {
    const box = $(page === "gpu" ? "gpu-error" : "error");
    box.hidden = false;
    box.textContent = `The API answered: ${text}`;
    $(page === "gpu" ? "gpu-status" : "status").textContent = "";
  });
  if (page === "gpu") {
    metrics.stop();
    if (!started.gpu) {
      started.gpu = true;
      gpu.init(params).catch(fail);
    }
  } else if (!started.metrics) {
    started.metrics = true;
    metrics.init(params).catch(fail);
  } else {
    metrics.resume();
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

window.smDashboard = { metrics, gpu };
const saved = storage.getKey();
if (saved) start(saved);
else showSignIn("");
