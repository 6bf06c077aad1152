// What the dashboard keeps in this browser (localStorage): the API key, the layout of each model's
// graphs ({order: [panel ids], hidden: [panel ids]}) and the last choices (model, scope, range, events).

const KEY = "servemetrics.apiKey";
const LAYOUT = "servemetrics.layout.";
const PREFS = "servemetrics.prefs";

function read(name, fallback) {
  try {
    const raw = localStorage.getItem(name);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}

function write(name, value) {
  try {
    localStorage.setItem(name, JSON.stringify(value));
  } catch {
    // storage full or disabled: the page still works, it just forgets
  }
}

export const getKey = () => read(KEY, null);
export const setKey = (key) => write(KEY, key);
export const clearKey = () => localStorage.removeItem(KEY);

export const getLayout = (model) => read(LAYOUT + model, null);
export const setLayout = (model, layout) => write(LAYOUT + model, layout);
export const clearLayout = (model) => localStorage.removeItem(LAYOUT + model);

export const getPrefs = () => read(PREFS, {});
export const setPrefs = (changes) => write(PREFS, { ...getPrefs(), ...changes });
