// Dictation: the "My terms" card — the personal list's terms, each editable and removable in place.

import { api, describeError } from "./api.js";
import { h } from "./dom.js";
import { weightLabel } from "./term-weights.js";

/** "Your 12 terms are active." (what the recognizer boosts for this dictation, in words). */
export function activeTermsText(count) {
  if (!count) return "No personal terms are active yet: add the words you dictate often.";
  return `Your ${count} term${count === 1 ? " is" : "s are"} active.`;
}

/**
 * Render `vocabulary.terms` into `list`. `onChanged(vocabulary, change)` runs after a term was edited or
 * removed on the server (`change`: {kind: "edit" | "remove", before, after?}).
 */
export function renderTermList(list, vocabulary, onChanged, highlight = null) {
  const terms = vocabulary ? vocabulary.terms || [] : [];
  if (!terms.length) {
    list.replaceChildren(h("li", { class: "muted" }, "No terms yet."));
    return;
  }
  list.replaceChildren(...terms.map((term) => termItem(list, vocabulary, term, onChanged, highlight)));
}

function termItem(list, vocabulary, term, onChanged, highlight) {
  const shown = term.display || term.text;
  const edit = h("button", { type: "button", class: "link", "aria-label": `Edit ${shown}` }, "Edit");
  const remove = h("button", { type: "button", class: "link danger", "aria-label": `Remove ${shown}` }, "Remove");
  const item = h(
    "li",
    { class: term.text === highlight ? "new" : "", dataset: { termId: term.id }, title: `weight: ${weightLabel(term.weight)}` },
    h("span", { class: "term-name" }, shown),
    edit,
    remove,
  );
  edit.addEventListener("click", () => item.replaceWith(editForm(list, vocabulary, term, onChanged)));
  remove.addEventListener("click", async () => {
    if (!confirm(`Remove “${shown}” from your terms?`)) return;
    remove.disabled = true;
    try {
      const body = await api("POST", `/api/vocabularies/${vocabulary.id}/terms/delete`, { ids: [term.id] });
      await onChanged(body.vocabulary, { kind: "remove", before: term });
    } catch (err) {
      remove.disabled = false;
      item.append(h("span", { class: "form-error", role: "alert" }, describeError(err)));
    }
  });
  return item;
}

function editForm(list, vocabulary, term, onChanged) {
  const prefix = `term-edit-${term.id}`;
  const text = h("input", { id: `${prefix}-text`, value: term.text, required: true, autocomplete: "off" });
  const display = h("input", { id: `${prefix}-display`, value: term.display && term.display !== term.text ? term.display : "", autocomplete: "off" });
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { class: "term-edit stack", dataset: { termId: term.id }, novalidate: true },
    h("div", { class: "field" }, h("label", { for: text.id }, "Term"), text),
    h("div", { class: "field" }, h("label", { for: display.id }, "Written as (optional)"), display),
    error,
    h(
      "div",
      { class: "inline-form" },
      h("button", { type: "submit", class: "primary" }, "Save"),
      h("button", { type: "button", onclick: () => renderTermList(list, vocabulary, onChanged) }, "Cancel"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const after = { text: text.value.trim(), display: display.value.trim() || null };
    if (!after.text) {
      error.textContent = "Type the term first.";
      text.focus();
      return;
    }
    try {
      const body = await api("PATCH", `/api/vocabularies/${vocabulary.id}/terms/${term.id}`, after);
      await onChanged(body.vocabulary, { kind: "edit", before: term, after });
    } catch (err) {
      error.textContent = err.errors && err.errors[0] && err.errors[0].reason ? `Not saved: ${err.errors[0].reason}` : describeError(err);
    }
  });
  const item = h("li", { class: "editing" }, form);
  queueMicrotask(() => text.focus());
  return item;
}
