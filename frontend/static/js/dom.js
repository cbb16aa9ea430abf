// Small DOM helpers shared by the pages. Text always goes in as text nodes, never as HTML.

/**
 * Create an element: h("button", {class: "primary", onclick: fn}, "Save").
 * Attributes starting with "on" become listeners; `dataset` and boolean attributes are handled.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "class") {
      el.className = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  appendAll(el, children);
  return el;
}

function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace every child of `el` with `children` in one step. */
export function replaceChildren(el, ...children) {
  const frag = document.createDocumentFragment();
  appendAll(frag, children);
  el.replaceChildren(frag);
}

/** `document.getElementById` that fails loudly when the page and the script disagree. */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing element #${id}`);
  return el;
}

/** Offer `content` as a file download named `filename`. */
export function downloadText(filename, content, mime = "text/plain") {
  const blob = new Blob([content], { type: `${mime};charset=utf-8` });
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Copy text to the clipboard; falls back to a hidden textarea where the async API is unavailable. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Permission refused (e.g. headless, unfocused page): use the selection fallback below.
    }
  }
  const area = h("textarea", { class: "visually-hidden", "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  return ok;
}

/** "2026-12-02T11:08:07Z" -> a short local date-time, or "—". */
export function formatDateTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** Persisted UI preference (localStorage may be unavailable, e.g. in private modes). */
export const prefs = {
  get(key, fallback = null) {
    try {
      const value = localStorage.getItem(`captions.${key}`);
      return value === null ? fallback : value;
    } catch {
      return fallback;
    }
  },
  set(key, value) {
    try {
      localStorage.setItem(`captions.${key}`, String(value));
    } catch {
      // Storage full or disabled: the preference lasts for this page only.
    }
  },
  remove(key) {
    try {
      localStorage.removeItem(`captions.${key}`);
    } catch {
      // Storage disabled: there is nothing stored to remove.
    }
  },
};
