// @ts-check
// Run settings: the protocol picker (filled from GET /api/protocols), the chosen protocol's own
// settings (a fieldset per protocol in index.html, sent as the request body's "settings"), and the
// settings the page remembers in localStorage between visits. The bearer token is deliberately never stored.

import { api } from "./api.js";
import { el, els } from "./dom.js";

const STORAGE = "phasegraph.settings";

/** Protocol id -> {id, seed, summary, route}, as the server last listed them (its route runs it). */
export const protocols = new Map();

function saved() {
  try {
    return JSON.parse(localStorage.getItem(STORAGE) || "{}");
  } catch (_) {
    return {};
  }
}

/** The inputs of a protocol's fieldset: each names the setting it sets in data-setting. */
function settingInputs(fieldset) {
  return [...fieldset.querySelectorAll("[data-setting]")];
}

/** Every protocol's settings as typed, blanks included: protocol id -> {setting: value}. */
function typedSettings() {
  return Object.fromEntries(
    els.protocolSettings.map((fieldset) => [
      fieldset.dataset.protocol,
      Object.fromEntries(settingInputs(fieldset).map((input) => [input.dataset.setting, input.value])),
    ]),
  );
}

/**
 * The settings the request body carries for ``protocol``: what its fieldset says, blanks left out (the
 * protocol's defaults apply then); null when the protocol has no settings on this page.
 */
export function protocolSettings(protocol) {
  const fieldset = els.protocolSettings.find((candidate) => candidate.dataset.protocol === protocol);
  if (!fieldset) return null;
  const chosen = settingInputs(fieldset)
    .map((input) => [input.dataset.setting, input.value.trim()])
    .filter(([, value]) => value !== "");
  return Object.fromEntries(chosen);
}

export function save() {
  try {
    localStorage.setItem(
      STORAGE,
      JSON.stringify({
        protocol: els.protocol.value,
        projectId: els.projectId.value,
        showToolOutputs: els.showToolOutputs.checked,
        protocolSettings: typedSettings(),
      }),
    );
  } catch (_) {
    /* storage unavailable: settings just don't persist */
  }
}

/** Put a protocol's remembered settings back (a select keeps its choice when the value is not one of its options). */
function restoreSettings(remembered) {
  for (const fieldset of els.protocolSettings) {
    const values = remembered[fieldset.dataset.protocol];
    if (!values || typeof values !== "object") continue;
    for (const input of settingInputs(fieldset)) {
      const value = values[input.dataset.setting];
      const fits = input.tagName !== "SELECT" || [...input.options].some((option) => option.value === value);
      if (typeof value === "string" && fits) input.value = value;
    }
  }
}

/** Put the remembered project id, tool-output choice and protocol settings back into the form. */
export function restore() {
  const settings = saved();
  if (typeof settings.projectId === "string" && settings.projectId) els.projectId.value = settings.projectId;
  if (typeof settings.showToolOutputs === "boolean") els.showToolOutputs.checked = settings.showToolOutputs;
  if (settings.protocolSettings && typeof settings.protocolSettings === "object") {
    restoreSettings(settings.protocolSettings);
  }
}

/** The chosen protocol's summary, and its settings fieldset (the others are hidden). */
export function showProtocol() {
  const spec = protocols.get(els.protocol.value);
  els.protocolSummary.textContent = spec ? spec.summary : "";
  for (const fieldset of els.protocolSettings) fieldset.hidden = fieldset.dataset.protocol !== els.protocol.value;
}

/** Fill the picker; keeps the current (or remembered) choice, else prefers triggered_phase. */
export async function loadProtocols() {
  const wanted = els.protocol.value || saved().protocol;
  let specs;
  try {
    specs = await api("GET", "/api/protocols");
  } catch (err) {
    els.protocol.replaceChildren();
    protocols.clear();
    els.protocolSummary.textContent = `could not load protocols: ${err.message}`;
    els.protocolSummary.classList.add("error-text");
    showProtocol(); // no protocol is chosen: no protocol's settings either
    return;
  }
  els.protocolSummary.classList.remove("error-text");
  protocols.clear();
  for (const spec of specs) protocols.set(spec.id, spec);
  const options = specs.map((spec) => {
    const option = el("option", "", spec.id);
    option.value = spec.id;
    option.title = spec.summary;
    return option;
  });
  els.protocol.replaceChildren(...options);
  if (wanted && protocols.has(wanted)) els.protocol.value = wanted;
  else if (protocols.has("triggered_phase")) els.protocol.value = "triggered_phase";
  showProtocol();
}
