// Time ranges: the presets end now (and auto-refresh); a custom range is two local date-times. The API
// checks the window (start < end, at most 7 days) and its 400 message is shown as it is.

import { toLocalInput } from "./format.js";

const HOUR = 3600 * 1000;
export const PRESETS = { "15m": HOUR / 4, "1h": HOUR, "6h": 6 * HOUR, "24h": 24 * HOUR, "7d": 7 * 24 * HOUR };

// -> {start, end, live} in epoch ms, or {error} when a custom field is empty or unreadable.
export function windowOf(range, custom, now = Date.now()) {
  if (range in PRESETS) return { start: now - PRESETS[range], end: now, live: true };
  const start = Date.parse(custom.start || "");
  const end = Date.parse(custom.end || "");
  if (Number.isNaN(start) || Number.isNaN(end)) return { error: "Choose both a start and an end for the custom range." };
  return { start, end, live: false };
}

// Defaults for the custom fields: the last 24 hours, to the minute.
export function defaultCustom(now = Date.now()) {
  return { start: toLocalInput(now - 24 * HOUR), end: toLocalInput(now) };
}
