// Shared state and small helpers of the admin page modules.

import { describeError } from "./api.js";
import { byId } from "./dom.js";

/** What every admin module reads: the vocabularies and meetings as last loaded. */
export const store = {
  user: null,
  vocabularies: [],
  meetings: [],
};

let statusTimer = 0;

/** Announce a short success message (screen readers) and show it briefly as a toast. */
export function notify(text) {
  byId("page-status").textContent = text;
  let toast = document.querySelector(".toast");
  if (!toast) {
    toast = document.createElement("div");
    toast.className = "toast";
    toast.setAttribute("aria-hidden", "true");
    document.body.append(toast);
  }
  toast.textContent = text;
  toast.hidden = false;
  clearTimeout(statusTimer);
  statusTimer = setTimeout(() => {
    toast.hidden = true;
  }, 3000);
}

/** Show an error banner for `err` (ApiError or Error); empty clears it. */
export function showError(err) {
  const banner = byId("page-error");
  banner.textContent = err ? describeError(err) : "";
  banner.hidden = !err;
}

/** Run an async action from a button: disables it meanwhile and reports failures in the banner. */
export async function busy(button, action) {
  if (button) button.disabled = true;
  try {
    showError(null);
    return await action();
  } catch (err) {
    showError(err);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

export function vocabularyName(id) {
  const vocabulary = store.vocabularies.find((v) => v.id === id);
  return vocabulary ? vocabulary.name : `#${id}`;
}
