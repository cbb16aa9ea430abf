// Admin: vocabularies list, create, rename, delete, export; the selected one's terms and import panel.

import { renderImportPanel } from "./admin-import.js";
import { busy, notify, showError, store } from "./admin-common.js";
import { renderTermsTable } from "./admin-terms.js";
import { api } from "./api.js";
import { byId, formatDateTime, h } from "./dom.js";

let selectedId = null;

export async function loadVocabularies() {
  const { vocabularies } = await api("GET", "/api/vocabularies");
  store.vocabularies = vocabularies;
  renderList();
  return vocabularies;
}

function renderList() {
  const list = byId("vocab-list");
  if (!store.vocabularies.length) {
    list.replaceChildren(h("li", { class: "muted" }, "No vocabularies yet."));
    return;
  }
  list.replaceChildren(
    ...store.vocabularies.map((v) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            "aria-current": v.id === selectedId ? "true" : "false",
            dataset: { vocabularyId: v.id },
            onclick: () => selectVocabulary(v.id),
          },
          h("span", {}, v.name, v.personal ? h("span", { class: "pill small subtle" }, "personal") : null),
          h("span", { class: "muted" }, `${v.term_count} terms`),
        ),
      ),
    ),
  );
}

export function bindVocabularyForms() {
  byId("vocab-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const error = byId("vocab-create-error");
    error.textContent = "";
    const name = byId("vocab-name").value.trim();
    if (!name) {
      error.textContent = "Give the vocabulary a name.";
      byId("vocab-name").focus();
      return;
    }
    try {
      const { vocabulary } = await api("POST", "/api/vocabularies", {
        name,
        description: byId("vocab-description").value.trim(),
        personal: byId("vocab-personal").checked,
      });
      form.reset();
      notify(`Created “${vocabulary.name}”.`);
      await loadVocabularies();
      await selectVocabulary(vocabulary.id);
    } catch (err) {
      error.textContent = fieldMessage(err);
    }
  });
}

function fieldMessage(err) {
  if (err.errors && err.errors.length) return err.errors.map((e) => e.reason || e.message).join("; ");
  return err.message;
}

/** Show the vocabulary `id`: details form, terms table, import and export. */
export async function selectVocabulary(id) {
  selectedId = id;
  renderList();
  const detail = byId("vocab-detail");
  try {
    const { vocabulary } = await api("GET", `/api/vocabularies/${id}`);
    renderDetail(detail, vocabulary);
  } catch (err) {
    showError(err);
  }
}

/** Update the list and the header after a change that returned the whole vocabulary. */
function vocabularyChanged(vocabulary) {
  const summary = store.vocabularies.find((v) => v.id === vocabulary.id);
  if (summary) {
    summary.term_count = vocabulary.terms.length;
    summary.version = vocabulary.version;
    summary.name = vocabulary.name;
  }
  renderList();
  const meta = document.getElementById("vocab-meta");
  if (meta) meta.textContent = metaText(vocabulary);
}

function metaText(vocabulary) {
  return `${vocabulary.terms.length} terms · version ${vocabulary.version} · updated ${formatDateTime(vocabulary.updated_at)}`;
}

function renderDetail(detail, vocabulary) {
  const name = h("input", { id: "vocab-edit-name", value: vocabulary.name, required: true, maxlength: 120 });
  const description = h("input", { id: "vocab-edit-description", value: vocabulary.description || "", maxlength: 500 });
  const save = h("button", { type: "submit" }, "Save name");
  const form = h(
    "form",
    { class: "card stack", "aria-labelledby": "vocab-detail-title" },
    h(
      "div",
      { class: "detail-head" },
      h("h2", { id: "vocab-detail-title" }, vocabulary.name),
      h("a", { class: "button", href: `/api/vocabularies/${vocabulary.id}/export?format=text`, download: "" }, "Export text"),
      h("a", { class: "button", href: `/api/vocabularies/${vocabulary.id}/export?format=csv`, download: "" }, "Export CSV"),
      h("button", { type: "button", class: "danger", onclick: (e) => deleteVocabulary(e.currentTarget, vocabulary) }, "Delete"),
    ),
    h("p", { id: "vocab-meta", class: "muted" }, metaText(vocabulary)),
    h(
      "div",
      { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "vocab-edit-name" }, "Name"), name),
      h("div", { class: "field grow" }, h("label", { for: "vocab-edit-description" }, "Description"), description),
      save,
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(save, async () => {
      const body = await api("PATCH", `/api/vocabularies/${vocabulary.id}`, {
        name: name.value.trim(),
        description: description.value.trim(),
      });
      notify("Saved.");
      await loadVocabularies();
      await selectVocabulary((body.vocabulary || vocabulary).id);
    });
  });
  const termsCard = h("div", { class: "card stack", id: "terms-card" });
  const importCard = h("div", { class: "card stack", id: "import-card" });
  detail.replaceChildren(form, termsCard, importCard);
  renderTermsTable(termsCard, vocabulary, vocabularyChanged);
  renderImportPanel(importCard, vocabulary, (updated) => {
    vocabularyChanged(updated);
    renderTermsTable(termsCard, updated, vocabularyChanged);
  });
}

async function deleteVocabulary(button, vocabulary) {
  if (!confirm(`Delete “${vocabulary.name}” and its ${vocabulary.terms.length} terms? This cannot be undone.`)) return;
  await busy(button, async () => {
    await api("DELETE", `/api/vocabularies/${vocabulary.id}`);
    notify(`Deleted “${vocabulary.name}”.`);
    selectedId = null;
    byId("vocab-detail").replaceChildren(h("div", { class: "card muted" }, "Select a vocabulary to edit its terms, or create one."));
    await loadVocabularies();
  });
}
