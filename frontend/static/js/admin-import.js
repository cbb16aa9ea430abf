// Admin: bulk import of terms (paste or upload), with each rejected line shown next to its reason.

import { notify, showError } from "./admin-common.js";
import { api } from "./api.js";
import { h } from "./dom.js";

const SHOW_ALL_LINES_UP_TO = 300;
const STATUS_TEXT = { saved: "✓ saved", blank: "", header: "column names", comment: "comment" };

/** "weights.csv" -> "csv"; anything else is the one-term-per-line text format. */
export function formatForFilename(name) {
  return /\.csv$/i.test(name || "") ? "csv" : "text";
}

/**
 * The lines to show after an import: every submitted line when the list is short (saved ones marked
 * ok), otherwise only the rejected ones. `errors` are the API's [{line, text, reason}] (1-based lines).
 */
export function importReportLines(content, errors, format = "text") {
  const lines = content.split(/\r?\n/);
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  const reasons = new Map(errors.map((e) => [Number(e.line), e.reason]));
  const numbers = lines.length <= SHOW_ALL_LINES_UP_TO ? lines.map((_, i) => i + 1) : [...reasons.keys()].sort((a, b) => a - b);
  return numbers.map((line) => {
    const text = lines[line - 1] ?? errors.find((e) => Number(e.line) === line)?.text ?? "";
    const reason = reasons.get(line) || null;
    const header = format === "csv" && line === 1 && /^\s*"?text"?\s*(,|$)/i.test(text);
    const comment = text.trimStart().startsWith("#");
    const status = reason ? "rejected" : !text.trim() ? "blank" : header ? "header" : comment ? "comment" : "saved";
    return { line, text, reason, status };
  });
}

export function renderImportPanel(card, vocabulary, onImported) {
  const format = h("select", { id: "import-format" },
    h("option", { value: "text" }, "Text — one term per line, optional Tab + weight"),
    h("option", { value: "csv" }, "CSV — text, weight, display, alternates"),
  );
  const content = h("textarea", { id: "import-content", rows: 7, spellcheck: "false", placeholder: "linezolid\napixaban\t1.5\n…" });
  const file = h("input", { id: "import-file", type: "file", accept: ".txt,.csv,.tsv,text/plain,text/csv" });
  const submit = h("button", { type: "submit", class: "primary", id: "import-submit" }, "Import");
  const summary = h("p", { id: "import-summary", role: "status" });
  const report = h("ol", { id: "import-report", class: "import-report", "aria-label": "Import result by line", hidden: true });
  const keepBad = h("button", { type: "button", hidden: true }, "Keep only the rejected lines to fix them");

  file.addEventListener("change", async () => {
    const chosen = file.files && file.files[0];
    if (!chosen) return;
    content.value = await chosen.text();
    format.value = formatForFilename(chosen.name);
  });
  keepBad.addEventListener("click", () => {
    const bad = [...report.querySelectorAll("li.bad code")].map((code) => code.textContent);
    content.value = bad.join("\n");
    report.hidden = true;
    keepBad.hidden = true;
    summary.textContent = "";
    content.focus();
  });

  const form = h(
    "form",
    { class: "stack", "aria-labelledby": "import-title" },
    h("h3", { id: "import-title" }, "Bulk import"),
    h("div", { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "import-format" }, "Format"), format),
      h("div", { class: "field" }, h("label", { for: "import-file" }, "Upload a file"), file),
    ),
    h("div", { class: "field" }, h("label", { for: "import-content" }, "Or paste the list"), content),
    h("div", { class: "inline-form" }, submit, keepBad),
    summary,
    report,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!content.value.trim()) {
      summary.textContent = "Paste a list or choose a file first.";
      return;
    }
    submit.disabled = true;
    showError(null);
    const submitted = content.value;
    try {
      const result = await api("POST", `/api/vocabularies/${vocabulary.id}/import`, {
        format: format.value,
        content: submitted,
      });
      showReport(result, submitted);
      onImported(result.vocabulary);
      notify(`Imported ${result.imported} term(s).`);
    } catch (err) {
      if (err.errors && err.errors.length && err.errors[0].line !== undefined) {
        showReport({ imported: 0, errors: err.errors }, submitted, err.message);
      } else {
        showError(err);
      }
    } finally {
      submit.disabled = false;
    }
  });

  function showReport(result, submitted, headline) {
    const errors = result.errors || [];
    const saved = `Imported ${result.imported} term${result.imported === 1 ? "" : "s"}.`;
    summary.textContent = headline || (errors.length
      ? `${saved} ${errors.length} line${errors.length === 1 ? " was" : "s were"} rejected — see the reasons next to them.`
      : `${saved} No errors.`);
    summary.className = errors.length ? "form-error" : "ack ok";
    const lines = importReportLines(submitted, errors, format.value);
    report.replaceChildren(
      ...lines.map((item) =>
        h(
          "li",
          { class: item.reason ? "bad" : `line-${item.status}`, dataset: { line: item.line }, id: `import-line-${item.line}` },
          h("span", { class: "ln" }, item.line),
          h("code", {}, item.text),
          h("span", { class: "reason" }, item.reason || STATUS_TEXT[item.status]),
        ),
      ),
    );
    report.hidden = lines.length === 0;
    keepBad.hidden = errors.length === 0;
    const firstBad = report.querySelector("li.bad");
    if (firstBad) firstBad.scrollIntoView({ block: "nearest" });
  }

  card.replaceChildren(form);
}
