// Run settings: the protocol picker (filled from GET /api/protocols) and the settings the page
// remembers in localStorage between visits. The bearer token is deliberately never stored.

import { api } from "./api.js";
import { el, els } from "./dom.js";

const STORAGE = "phasegraph.settings";

/** Protocol id -> {id, seed, summary, route}, as the server last listed them. */
export const protocols = new Map();

function saved() {
  try {
    return JSON.parse(localStorage.getItem(STORAGE) || "{}");
  } catch (_) {
    return {};
  }
}

export function save() {
  try {
    localStorage.setItem(
      STORAGE,
      JSON.stringify({
        protocol: els.protocol.value,
        projectId: els.projectId.value,
        showToolOutputs: els.showToolOutputs.checked,
      }),
    );
  } catch (_) {
    /* storage unavailable: settings just don't persist */
  }
}

/** Put the remembered project id and tool-output choice back into the form. */
export function restore() {
  const settings = saved();
  if (typeof settings.projectId === "string" && settings.projectId) els.projectId.value = settings.projectId;
  if (typeof settings.showToolOutputs === "boolean") els.showToolOutputs.checked = settings.showToolOutputs;
}

export function showSummary() {
  const spec = protocols.get(els.protocol.value);
  els.protocolSummary.textContent = spec ? spec.summary : "";
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
    return;
  }
  els.protocolSummary.classList.remove("error-text");
  protocols.clear();
  for (const spec of specs) protocols.set(spec.id, spec);
  const options = specs.map((spec) => {
    const option = el("option", "", `${spec.id} (seed ${spec.seed})`);
    option.value = spec.id;
    return option;
  });
  els.protocol.replaceChildren(...options);
  if (wanted && protocols.has(wanted)) els.protocol.value = wanted;
  else if (protocols.has("triggered_phase")) els.protocol.value = "triggered_phase";
  showSummary();
}
