// The time-range controls a page of graphs shares (the Metrics tab, the Model APIs tab): the range
// select (presets ending now, or Custom… with two local date-times, up to 7 days: the API checks it),
// the custom fields and their Apply button, Auto-refresh (every 30 s, only for a range ending now) and
// Refresh. Each page has its own elements; the behaviour is this module's.

import { defaultCustom, windowOf } from "./range.js";
import * as storage from "./storage.js";

export const REFRESH_MS = 30_000;

/**
 * @param {{range: HTMLSelectElement, custom: HTMLElement, customStart: HTMLInputElement,
 *   customEnd: HTMLInputElement, apply: HTMLButtonElement, autorefresh: HTMLInputElement,
 *   refresh: HTMLButtonElement}} el - the page's controls
 * @param {{load: () => void, refresh: () => void, prefKey?: string}} on - load: the range changed (or
 *   Refresh); refresh: an auto-refresh tick (a quiet load); prefKey: the storage.getPrefs() key that
 *   keeps the last preset range ("range" by default)
 * @returns {{window: () => ({start: number, end: number, live: boolean} | {error: string}),
 *   startLoad: (page: {graphs: HTMLElement, setStatus: (t: string) => void, showError: (t: string) => void,
 *   syncHash: () => void}, quiet: boolean) => ({start: number, end: number, live: boolean} | null),
 *   schedule: (live: boolean) => void, stop: () => void, value: () => string,
 *   restore: (wanted?: string) => void}} window: the chosen window in epoch ms; schedule: auto-refresh
 *   on (a live window, the box ticked) or off; restore: the range from the address or the last choice
 */
export function createRangeControls(el, { load, refresh, prefKey = "range" }) {
  let custom = defaultCustom();
  let timer = null;

  function stop() {
    clearInterval(timer);
    timer = null;
  }

  function schedule(live) {
    stop();
    el.autorefresh.disabled = !live;
    if (live && el.autorefresh.checked) timer = setInterval(refresh, REFRESH_MS);
  }

  function restore(wanted) {
    const saved = storage.getPrefs()[prefKey];
    const known = (v) => [...el.range.options].some((o) => o.value === v);
    if (wanted && known(wanted)) el.range.value = wanted;
    else if (saved && saved !== "custom" && known(saved)) el.range.value = saved;
  }

  el.range.addEventListener("change", () => {
    el.custom.hidden = el.range.value !== "custom";
    storage.setPrefs({ [prefKey]: el.range.value });
    if (el.range.value === "custom") {
      el.customStart.value = custom.start;
      el.customEnd.value = custom.end;
      el.customStart.focus();
      return;
    }
    load();
  });
  el.apply.addEventListener("click", () => {
    custom = { start: el.customStart.value, end: el.customEnd.value };
    load();
  });
  el.autorefresh.addEventListener("change", () => schedule(!el.autorefresh.disabled));
  el.refresh.addEventListener("click", () => load());

  const chosen = () => windowOf(el.range.value, custom);

  // The start of the page's load(): the window, or null when it cannot be read (its error shown in the
  // page's status, the last graphs kept); else auto-refresh set for it, the address written and, unless
  // `quiet` (an auto-refresh tick), the graphs marked loading.
  function startLoad({ graphs, setStatus, showError, syncHash }, quiet) {
    const win = chosen();
    if (win.error) {
      showError("");
      setStatus(win.error);
      return null;
    }
    schedule(win.live);
    syncHash();
    if (!quiet) {
      setStatus("Loading…");
      graphs.dataset.renderState = "loading";
      graphs.setAttribute("aria-busy", "true");
    }
    return win;
  }

  return { window: chosen, startLoad, schedule, stop, value: () => el.range.value, restore };
}
