// Transcripts (/transcripts): search across the meetings the user may read, the meetings and "My dictations"
// lists, and one transcript (/transcripts?id=ID) to read, correct, rename or merge speakers, turn a
// correction into a vocabulary term, and add a recording of the meeting (recording-upload.js). The API:
// /api/meetings/{id}/transcript and friends (docs/protocol.md).

import { api, describeError } from "./api.js";
import { byId, copyText, formatDateTime, h } from "./dom.js";
import { requireUser } from "./login.js";
import { offerRecordingUpload } from "./recording-upload.js";

const page = { user: null, transcript: null, meetingId: null };

function showError(text) {
  const banner = byId("page-error");
  banner.textContent = text || "";
  banner.hidden = !text;
}

/** "00:01:05" from seconds on the meeting's clock. */
export function clock(seconds) {
  const total = Math.max(0, Math.floor(Number(seconds) || 0));
  const pad = (n) => String(n).padStart(2, "0");
  return `${pad(Math.floor(total / 3600))}:${pad(Math.floor((total % 3600) / 60))}:${pad(total % 60)}`;
}

/**
 * `text` as nodes with each vocabulary term (case-insensitive, whole words, the longest first) in a <mark>.
 */
export function highlightTerms(text, terms) {
  const wanted = [...new Set((terms || []).filter(Boolean))].sort((a, b) => b.length - a.length);
  if (!wanted.length) return [text];
  const escaped = wanted.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(${escaped.join("|")})(?![\\p{L}\\p{N}])`, "giu");
  const out = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    out.push(h("mark", { class: "term" }, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

async function main() {
  page.user = await requireUser(byId("login"), "Log in to read and search your meetings' transcripts.");
  byId("search").hidden = false;
  byId("search").addEventListener("submit", (event) => {
    event.preventDefault();
    search(byId("search-q").value);
  });
  page.meetingId = new URLSearchParams(location.search).get("id");
  if (page.meetingId) await openTranscript();
  else await showIndex();
}

// ----- the lists and search -------------------------------------------------------------------------------
async function showIndex() {
  byId("index").hidden = false;
  const [meetings, dictations] = await Promise.all([
    api("GET", "/api/transcripts?kind=meeting"),
    api("GET", "/api/transcripts?kind=dictation"),
  ]);
  fillList(byId("meeting-list"), meetings.transcripts, "No meetings yet.");
  fillList(byId("dictation-list"), dictations.transcripts, "No dictations yet: start one on the Dictation page.");
}

function fillList(list, items, empty) {
  if (!items.length) {
    list.replaceChildren(h("li", { class: "muted" }, empty));
    return;
  }
  list.replaceChildren(
    ...items.map((item) =>
      h(
        "li",
        { dataset: { meetingId: item.id, status: item.status } },
        h("a", { href: `/transcripts?id=${item.id}`, class: "transcript-title" }, item.display_title),
        " ",
        h("span", { class: `pill small status-${item.status}` }, item.status === "live" ? "Live" : item.status === "ended" ? "Finished" : "Not started"),
        " ",
        h("span", { class: "muted" }, formatDateTime(item.started_at || item.created_at)),
        item.preview ? h("p", { class: "preview" }, item.preview) : null,
      ),
    ),
  );
}

async function search(q) {
  const status = byId("search-status");
  status.textContent = "Searching…";
  let hits;
  try {
    ({ hits } = await api("GET", `/api/search?q=${encodeURIComponent(q)}`));
  } catch (err) {
    status.textContent = describeError(err);
    return;
  }
  status.textContent = hits.length ? `${hits.length} line${hits.length === 1 ? "" : "s"} found.` : "Nothing found.";
  byId("results").hidden = false;
  byId("hits").replaceChildren(
    ...hits.map((hit) =>
      h(
        "li",
        {},
        h(
          "a",
          { href: `/transcripts?id=${hit.meeting_id}#line-${hit.line_id}` },
          `${hit.meeting_title} · ${clock(hit.start_s)}`,
        ),
        " ",
        h("span", { class: "muted" }, hit.speaker ? `${hit.speaker}: ` : ""),
        h("span", {}, ...highlightTerms(hit.text, q.split(/\s+/))),
      ),
    ),
  );
}

// ----- one transcript ------------------------------------------------------------------------------------
async function openTranscript() {
  const id = encodeURIComponent(page.meetingId);
  try {
    page.transcript = await api("GET", `/api/meetings/${id}/transcript`);
  } catch (err) {
    showError(err.status === 404 ? `There is no transcript with the ID “${page.meetingId}”.` : describeError(err));
    return;
  }
  const { meeting } = page.transcript;
  document.title = `${meeting.title} — Transcript`;
  byId("page-title").textContent = meeting.title;
  byId("meeting-when").textContent = formatDateTime(meeting.started_at || meeting.created_at);
  byId("transcript").hidden = false;
  byId("edit-hint").hidden = !page.transcript.can_edit;
  for (const link of document.querySelectorAll("#server-export a")) {
    link.href = `/api/meetings/${id}/captions?format=${link.dataset.format}`;
    link.setAttribute("download", "");
  }
  byId("copy-transcript").addEventListener("click", async () => {
    const said = (l) => (l.dictated === undefined ? l.text : l.dictated);
    const kept = page.transcript.lines.filter((l) => said(l) !== null);
    const text = kept.map((l) => `[${clock(l.start_s)}] ${l.speaker.name}: ${said(l)}`).join("\n");
    byId("copy-status").textContent = (await copyText(text)) ? "Copied to the clipboard." : "Copy failed: select the text and press Ctrl+C.";
  });
  renderLines();
  renderSpeakers();
  // can_edit is the recordings route's own rule: the meeting's owner (its organiser) or an admin
  if (page.transcript.can_edit) offerRecordingUpload(page.meetingId, () => reload());
  const target = /^#line-(\d+)$/.exec(location.hash);
  const row = target && document.getElementById(`line-${target[1]}`);
  if (row) {
    row.classList.add("found");
    row.scrollIntoView({ block: "center" });
    row.focus();
  }
}

function renderLines() {
  const { lines } = page.transcript;
  const list = byId("lines");
  if (!lines.length) {
    list.replaceChildren(h("li", { class: "muted" }, "No lines were captioned."));
    return;
  }
  list.replaceChildren(...lines.map(lineItem));
}

/** A line's text: a dictation's with its spoken commands carried out ("scratched" when taken back). */
function shownText(line) {
  if (line.dictated === null) return h("span", { class: "text scratched" }, h("s", {}, line.text), " (scratched)");
  const text = line.dictated === undefined ? line.text : line.dictated;
  return h("span", { class: "text" }, ...highlightTerms(text, page.transcript.terms));
}

function lineItem(line) {
  const item = h(
    "li",
    { id: `line-${line.id}`, class: "line", tabindex: "-1", dataset: { lineId: line.id, edited: line.edited ? "true" : "false" } },
    h("span", { class: "time" }, clock(line.start_s)),
    h("span", { class: "speaker" }, line.speaker.name),
    shownText(line),
  );
  if (line.edited) {
    const details = h(
      "details",
      { class: "original" },
      h("summary", {}, "Edited"),
      h("p", {}, "Recognized: ", h("q", {}, line.original)),
      h("ul", { class: "history" }),
    );
    details.addEventListener("toggle", () => details.open && loadHistory(line, details.querySelector(".history")));
    item.append(details);
  }
  if (page.transcript.can_edit) {
    const edit = h("button", { type: "button", class: "link edit", "aria-label": `Edit the line at ${clock(line.start_s)}` }, "Edit");
    edit.addEventListener("click", () => editLine(line, item));
    item.append(edit);
  }
  return item;
}

async function loadHistory(line, list) {
  try {
    const { edits } = await api("GET", `/api/meetings/${encodeURIComponent(page.meetingId)}/captions/${line.id}/history`);
    list.replaceChildren(
      ...edits.map((e) => h("li", {}, `${formatDateTime(e.created_at)}, ${e.edited_by.name}: `, h("q", {}, e.text))),
    );
  } catch (err) {
    list.replaceChildren(h("li", { class: "form-error" }, describeError(err)));
  }
}

function editLine(line, item) {
  const inputId = `edit-${line.id}`;
  const input = h("textarea", { id: inputId, rows: "2", maxlength: "2000" });
  input.value = line.text;
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { class: "line-edit", id: `line-${line.id}`, dataset: { lineId: line.id } },
    h("label", { for: inputId }, `Correct the line at ${clock(line.start_s)} (${line.speaker.name})`),
    input,
    h("div", { class: "toolbar" }, h("button", { type: "submit", class: "primary" }, "Save"), h("button", { type: "button", class: "cancel" }, "Cancel")),
    error,
  );
  const restore = (row) => {
    form.replaceWith(row);
    row.querySelector("button.edit").focus();
  };
  form.querySelector(".cancel").addEventListener("click", () => restore(item));
  form.addEventListener("keydown", (event) => event.key === "Escape" && restore(item));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      const body = await api("PUT", `/api/meetings/${encodeURIComponent(page.meetingId)}/captions/${line.id}`, { text: input.value });
      const index = page.transcript.lines.findIndex((l) => l.id === line.id);
      page.transcript.lines[index] = body.line;
      page.transcript.targets = body.targets;
      restore(lineItem(body.line));
      offerTerms(body.suggestions);
    } catch (err) {
      error.textContent = describeError(err);
    }
  });
  item.replaceWith(form);
  input.focus();
}

/** After a correction: "Add “Halvorsen Logistics” to [list] [Add term]" for each suggested term. */
function offerTerms(suggestions) {
  const box = byId("suggest");
  if (!suggestions || !suggestions.length) {
    box.replaceChildren("Saved.");
    return;
  }
  const targets = page.transcript.targets.length
    ? page.transcript.targets
    : [{ id: "", name: "My terms (a new personal list)", scope: "personal" }];
  box.replaceChildren(
    "Saved. ",
    ...suggestions.map((term, n) => {
      const selectId = `suggest-target-${n}`;
      const select = h(
        "select",
        { id: selectId },
        ...targets.map((t) => h("option", { value: t.id }, t.scope === "meeting" ? `${t.name} (this meeting)` : `${t.name} (personal)`)),
      );
      const add = h("button", { type: "button", class: "primary add-term" }, `Add “${term}”`);
      const wrap = h("span", { class: "suggestion" }, h("label", { for: selectId }, `Add “${term}” to`), " ", select, " ", add);
      add.addEventListener("click", async () => {
        add.disabled = true;
        try {
          let vocabularyId = select.value;
          if (!vocabularyId) {
            const { vocabulary } = await api("POST", "/api/vocabularies", { name: "My terms", personal: true });
            vocabularyId = vocabulary.id;
          }
          await api("POST", `/api/vocabularies/${vocabularyId}/terms`, { terms: [{ text: term }] });
          if (!page.transcript.terms.includes(term)) page.transcript.terms.push(term);
          wrap.replaceChildren(`“${term}” was added to ${select.selectedOptions[0].textContent}.`);
          renderLines();
        } catch (err) {
          add.disabled = false;
          wrap.append(h("span", { class: "form-error" }, ` ${describeError(err)}`));
        }
      });
      return wrap;
    }),
  );
}

function renderSpeakers() {
  const { speakers, can_edit: canEdit } = page.transcript;
  const list = byId("speakers");
  if (!speakers.length) {
    list.replaceChildren(h("li", { class: "muted" }, "No one spoke."));
    return;
  }
  list.replaceChildren(...speakers.map((s) => speakerItem(s, speakers, canEdit)));
}

function speakerItem(speaker, speakers, canEdit) {
  const merged = speakers.find((s) => s.user_id === speaker.merged_into);
  const label = merged ? `${speaker.username}: shown as ${merged.name}` : speaker.name;
  const item = h("li", { dataset: { userId: speaker.user_id } }, h("span", { class: "speaker-name" }, label));
  if (!canEdit) return item;
  const base = `/api/meetings/${encodeURIComponent(page.meetingId)}`;
  const status = byId("speaker-status");
  if (!merged) {
    const nameId = `speaker-name-${speaker.user_id}`;
    const input = h("input", { id: nameId, maxlength: "100", value: speaker.name, autocomplete: "off" });
    const rename = h(
      "form",
      { class: "inline-form rename" },
      h("label", { for: nameId }, `Name of ${speaker.username}`),
      input,
      h("button", { type: "submit" }, "Rename"),
    );
    rename.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api("PUT", `${base}/participants/${speaker.user_id}`, { display_name: input.value });
        status.textContent = `Renamed to ${input.value.trim() || speaker.username} in the whole meeting.`;
        await reload(`#speakers [data-user-id="${speaker.user_id}"] .rename input`);
      } catch (err) {
        status.textContent = describeError(err);
      }
    });
    item.append(rename);
  }
  const others = speakers.filter((s) => s.user_id !== speaker.user_id && s.merged_into === null);
  if (merged) {
    const undo = h("button", { type: "button", class: "unmerge" }, `Show ${speaker.username} separately`);
    undo.addEventListener("click", () => merge(speaker, null));
    item.append(" ", undo);
  } else if (others.length && !speakers.some((s) => s.merged_into === speaker.user_id)) {
    const selectId = `merge-into-${speaker.user_id}`;
    const select = h("select", { id: selectId }, ...others.map((o) => h("option", { value: o.user_id }, o.name)));
    const button = h("button", { type: "button", class: "merge" }, "Merge");
    button.addEventListener("click", () => merge(speaker, Number(select.value)));
    item.append(h("span", { class: "inline-form" }, h("label", { for: selectId }, `Show ${speaker.name}'s lines as`), select, button));
  }
  return item;
}

async function merge(speaker, into) {
  const status = byId("speaker-status");
  try {
    await api("PUT", `/api/meetings/${encodeURIComponent(page.meetingId)}/speakers/${speaker.user_id}/merge`, { into_user_id: into });
    status.textContent = into === null ? `${speaker.username} is shown separately again.` : "Merged.";
    await reload(`#speakers [data-user-id="${speaker.user_id}"] button`);
  } catch (err) {
    status.textContent = describeError(err);
  }
}

/**
 * Re-read the transcript (names changed everywhere, a recording's lines added) and put the focus back on
 * `focusSelector` (when given).
 */
async function reload(focusSelector) {
  page.transcript = await api("GET", `/api/meetings/${encodeURIComponent(page.meetingId)}/transcript`);
  const { meeting } = page.transcript;
  byId("meeting-when").textContent = formatDateTime(meeting.started_at || meeting.created_at);
  renderLines();
  renderSpeakers();
  const target = focusSelector && document.querySelector(focusSelector);
  if (target) target.focus();
}

main().catch((err) => showError(describeError(err)));
