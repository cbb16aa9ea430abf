// Admin: the terms table of one vocabulary — inline add, edit and delete with weight and display form.

import { busy, notify } from "./admin-common.js";
import { api } from "./api.js";
import { h } from "./dom.js";
import { weightHelp, weightLabel, weightSelect } from "./term-weights.js";

/** "a, b | c" -> ["a", "b", "c"] (commas or bars separate alternates). */
export function parseAlternates(value) {
  return String(value || "")
    .split(/[,|]/)
    .map((item) => item.trim())
    .filter(Boolean);
}

function termInputs(term = {}, prefix) {
  return {
    text: h("input", { id: `${prefix}-text`, value: term.text || "", "aria-label": "Term", required: true }),
    display: h("input", { id: `${prefix}-display`, value: term.display && term.display !== term.text ? term.display : "", "aria-label": "Written as", placeholder: "same as term" }),
    weight: weightSelect(h, { id: `${prefix}-weight`, class: "weight", "aria-label": "Weight" }, term.weight),
    alternates: h("input", { id: `${prefix}-alternates`, value: (term.alternates || []).join(", "), "aria-label": "Alternates", placeholder: "comma separated" }),
  };
}

function readInputs(inputs) {
  const term = { text: inputs.text.value.trim() };
  if (inputs.display.value.trim()) term.display = inputs.display.value.trim();
  term.weight = Number(inputs.weight.value);
  term.alternates = parseAlternates(inputs.alternates.value);
  return term;
}

function errorText(err) {
  if (err.errors && err.errors.length) return err.errors.map((e) => (e.text ? `“${e.text}”: ${e.reason}` : e.reason)).join("; ");
  return err.message;
}

/**
 * Render (or re-render) the table into `card` for `vocabulary` (with its terms); `onChange(updated)` is
 * called after every successful change with the vocabulary the API returned.
 */
export function renderTermsTable(card, vocabulary, onChange) {
  const selected = new Set();
  const deleteSelected = h("button", { type: "button", class: "danger", disabled: true }, "Delete selected");
  const refresh = (updated) => {
    onChange(updated);
    renderTermsTable(card, updated, onChange);
  };
  const updateSelection = () => {
    deleteSelected.disabled = selected.size === 0;
    deleteSelected.textContent = selected.size ? `Delete selected (${selected.size})` : "Delete selected";
  };
  deleteSelected.addEventListener("click", () =>
    busy(deleteSelected, async () => {
      if (!confirm(`Delete ${selected.size} term(s)?`)) return;
      const { vocabulary: updated } = await api("POST", `/api/vocabularies/${vocabulary.id}/terms/delete`, { ids: [...selected] });
      notify(`Deleted ${selected.size} term(s).`);
      refresh(updated);
    }),
  );
  const rows = vocabulary.terms.map((term) => viewRow(vocabulary, term, selected, updateSelection, refresh));
  const table = h(
    "table",
    { id: "terms-table", "aria-label": `Terms of ${vocabulary.name}` },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, h("span", { class: "visually-hidden" }, "Select")), h("th", {}, "Term"), h("th", {}, "Written as"),
        h("th", { class: "num" }, "Weight"), h("th", {}, "Alternates"), h("th", {}, h("span", { class: "visually-hidden" }, "Actions"))),
    ),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No terms yet: add one below or import a list."))),
    addRow(vocabulary, refresh),
  );
  card.replaceChildren(
    h("div", { class: "inline-form" }, h("h3", {}, "Terms"), h("span", { class: "spacer" }), deleteSelected),
    h("div", { class: "table-scroll" }, table),
    h("p", { id: "term-add-error", class: "form-error", role: "alert" }),
    h("p", { class: "hint", id: "weight-help" }, `Weight: how strongly a term is favoured where the audio could be it. ${weightHelp()} A term is only ever shown where the audio supports it. “Written as”: how it is shown, e.g. “Linezolid” for “linezolid”.`),
  );
}

function viewRow(vocabulary, term, selected, updateSelection, refresh) {
  const check = h("input", { type: "checkbox", "aria-label": `Select ${term.text}` });
  check.addEventListener("change", () => {
    if (check.checked) selected.add(term.id);
    else selected.delete(term.id);
    row.classList.toggle("selected", check.checked);
    updateSelection();
  });
  const row = h(
    "tr",
    { dataset: { termId: term.id } },
    h("td", {}, check),
    h("td", {}, term.text),
    h("td", {}, term.display && term.display !== term.text ? term.display : h("span", { class: "muted" }, "—")),
    h("td", { class: "num" }, weightLabel(term.weight)),
    h("td", {}, (term.alternates || []).join(", ")),
    h("td", {}, h("div", { class: "row-actions" },
      h("button", { type: "button", class: "link", onclick: () => row.replaceWith(editRow(vocabulary, term, row, refresh)) }, "Edit"),
      h("button", { type: "button", class: "link danger", onclick: (e) => deleteTerm(e.currentTarget, vocabulary, term, refresh) }, "Delete"),
    )),
  );
  return row;
}

function editRow(vocabulary, term, original, refresh) {
  const inputs = termInputs(term, `edit-${term.id}`);
  const error = h("div", { class: "form-error", role: "alert" });
  const save = h("button", { type: "button", class: "primary" }, "Save");
  const row = h(
    "tr",
    { class: "editing", dataset: { termId: term.id } },
    h("td", {}),
    h("td", {}, inputs.text, error),
    h("td", {}, inputs.display),
    h("td", { class: "num" }, inputs.weight),
    h("td", {}, inputs.alternates),
    h("td", {}, h("div", { class: "row-actions" }, save, h("button", { type: "button", onclick: () => row.replaceWith(original) }, "Cancel"))),
  );
  const submit = async () => {
    save.disabled = true;
    error.textContent = "";
    try {
      const patch = readInputs(inputs);
      const hadDisplay = term.display && term.display !== term.text;
      if (!inputs.display.value.trim() && hadDisplay) patch.display = null; // back to "same as term"
      const { vocabulary: updated } = await api("PATCH", `/api/vocabularies/${vocabulary.id}/terms/${term.id}`, patch);
      notify(`Saved “${patch.text}”.`);
      refresh(updated);
    } catch (err) {
      error.textContent = errorText(err);
      inputs.text.setAttribute("aria-invalid", "true");
    } finally {
      save.disabled = false;
    }
  };
  save.addEventListener("click", submit);
  row.addEventListener("keydown", (event) => {
    if (event.key === "Enter") submit();
    if (event.key === "Escape") row.replaceWith(original);
  });
  queueMicrotask(() => inputs.text.focus());
  return row;
}

function addRow(vocabulary, refresh) {
  const inputs = termInputs({}, "new-term");
  const add = h("button", { type: "button", class: "primary", id: "term-add" }, "Add term");
  const submit = async () => {
    const error = document.getElementById("term-add-error");
    error.textContent = "";
    const term = readInputs(inputs);
    if (!term.text) {
      error.textContent = "Type the term to add.";
      inputs.text.setAttribute("aria-invalid", "true");
      inputs.text.focus();
      return;
    }
    add.disabled = true;
    try {
      const { vocabulary: updated } = await api("POST", `/api/vocabularies/${vocabulary.id}/terms`, { terms: [term] });
      notify(`Added “${term.text}”.`);
      refresh(updated);
      document.getElementById("new-term-text")?.focus();
    } catch (err) {
      error.textContent = errorText(err);
      inputs.text.setAttribute("aria-invalid", "true");
    } finally {
      add.disabled = false;
    }
  };
  add.addEventListener("click", submit);
  const row = h(
    "tr",
    { class: "add-row" },
    h("td", {}),
    h("td", {}, inputs.text),
    h("td", {}, inputs.display),
    h("td", { class: "num" }, inputs.weight),
    h("td", {}, inputs.alternates),
    h("td", {}, h("div", { class: "row-actions" }, add)),
  );
  row.addEventListener("keydown", (event) => {
    if (event.key === "Enter") submit();
  });
  return h("tfoot", {}, row);
}

async function deleteTerm(button, vocabulary, term, refresh) {
  if (!confirm(`Delete “${term.text}”?`)) return;
  await busy(button, async () => {
    const { vocabulary: updated } = await api("POST", `/api/vocabularies/${vocabulary.id}/terms/delete`, { ids: [term.id] });
    notify(`Deleted “${term.text}”.`);
    refresh(updated);
  });
}
