// Admin: meetings — create with chunk size, decoding and vocabularies; assign vocabularies; start/end.

import { busy, notify, showError, store, vocabularyName } from "./admin-common.js";
import { api } from "./api.js";
import { deleteMeeting, membersRow } from "./admin-privacy.js";
import { byId, copyText, formatDateTime, h } from "./dom.js";

export async function loadMeetings() {
  const { meetings } = await api("GET", "/api/meetings");
  store.meetings = meetings;
  return meetings;
}

function vocabularyChecks(idPrefix, checkedIds = []) {
  if (!store.vocabularies.length) return h("p", { class: "muted" }, "No vocabularies yet — create one first.");
  return h(
    "div",
    { class: "checks", role: "group", "aria-label": "Vocabularies" },
    store.vocabularies
      .filter((v) => !v.personal)
      .map((v) =>
        h("label", { class: "toggle" },
          h("input", { type: "checkbox", name: "vocabulary", value: v.id, id: `${idPrefix}-${v.id}`, checked: checkedIds.includes(v.id) }),
          v.name),
      ),
  );
}

function checkedIds(container) {
  return [...container.querySelectorAll('input[name="vocabulary"]:checked')].map((input) => Number(input.value));
}

/** Render the meetings tab into its panel (reloads meetings and uses the loaded vocabularies). */
export async function renderMeetings() {
  const panel = byId("tab-meetings");
  try {
    await loadMeetings();
  } catch (err) {
    showError(err);
    return;
  }
  panel.replaceChildren(createForm(), meetingsTable());
}

function createForm() {
  const title = h("input", { id: "meeting-title", required: true, maxlength: 200 });
  const chunk = h("select", { id: "meeting-chunk" },
    h("option", { value: "0.56" }, "0.56 s — faster captions"),
    h("option", { value: "1.12" }, "1.12 s — a little more accurate"),
  );
  const decoding = h("select", { id: "meeting-decoding" },
    h("option", { value: "beam" }, "Beam search — most accurate"),
    h("option", { value: "greedy" }, "Greedy — lowest cost"),
  );
  const checks = vocabularyChecks("new-meeting-vocab");
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create meeting");
  const form = h(
    "form",
    { class: "card stack", id: "meeting-create", "aria-labelledby": "meeting-create-title" },
    h("h2", { id: "meeting-create-title" }, "New meeting"),
    h("div", { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "meeting-title" }, "Title"), title),
      h("div", { class: "field" }, h("label", { for: "meeting-chunk" }, "Chunk length"), chunk),
      h("div", { class: "field" }, h("label", { for: "meeting-decoding" }, "Decoding"), decoding),
    ),
    h("div", { class: "field" }, h("span", { class: "label" }, "Vocabularies"), checks),
    error,
    h("div", {}, submit),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    if (!title.value.trim()) {
      error.textContent = "Give the meeting a title.";
      title.focus();
      return;
    }
    await busy(submit, async () => {
      try {
        const { meeting } = await api("POST", "/api/meetings", {
          title: title.value.trim(),
          chunk_s: Number(chunk.value),
          decoding: decoding.value,
          vocabulary_ids: checkedIds(form),
        });
        notify(`Created “${meeting.title}”.`);
        await renderMeetings();
      } catch (err) {
        error.textContent = err.errors && err.errors.length ? err.errors.map((e) => e.reason).join("; ") : err.message;
      }
    });
  });
  return form;
}

function meetingsTable() {
  const meetings = store.meetings.filter((m) => m.kind !== "dictation");
  const body = meetings.length
    ? meetings.map(meetingRow)
    : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No meetings yet."))];
  return h(
    "div",
    { class: "card stack" },
    h("h2", {}, "Meetings"),
    h("div", { class: "table-scroll" }, h("table", { id: "meetings-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Title"), h("th", {}, "Status"), h("th", {}, "Chunk · decoding"),
        h("th", {}, "Vocabularies"), h("th", {}, "Created"), h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
      h("tbody", {}, body),
    )),
  );
}

function meetingRow(meeting) {
  const link = `${location.origin}/?meeting=${encodeURIComponent(meeting.id)}`;
  const actions = h("div", { class: "row-actions" });
  if (meeting.status !== "live" && meeting.status !== "ended") {
    actions.append(h("button", { type: "button", onclick: (e) => lifecycle(e.currentTarget, meeting, "start") }, "Start"));
  }
  if (meeting.status === "live") {
    actions.append(h("button", { type: "button", class: "danger", onclick: (e) => lifecycle(e.currentTarget, meeting, "end") }, "End"));
  }
  actions.append(
    h("button", { type: "button", onclick: () => row.after(assignRow(meeting, row)) , "aria-label": `Vocabularies of ${meeting.title}` }, "Vocabularies…"),
    h("button", { type: "button", "aria-label": `Members of ${meeting.title}`,
      onclick: (e) => busy(e.currentTarget, async () => row.after(await membersRow(meeting, 6))) }, "Members…"),
    h("button", { type: "button", class: "link", onclick: async () => notify((await copyText(link)) ? "Link copied." : link) }, "Copy link"),
    h("button", { type: "button", class: "danger", "aria-label": `Delete ${meeting.title}`,
      onclick: (e) => deleteMeeting(e.currentTarget, meeting, renderMeetings) }, "Delete"),
  );
  const names = (meeting.vocabulary_ids || []).map(vocabularyName);
  const row = h(
    "tr",
    { dataset: { meetingId: meeting.id } },
    h("td", {}, h("a", { href: `/?meeting=${encodeURIComponent(meeting.id)}` }, meeting.title)),
    h("td", {}, h("span", { class: `pill small status-${meeting.status}` }, meeting.status)),
    h("td", {}, `${Number(meeting.chunk_s).toFixed(2)} s · ${meeting.decoding}`),
    h("td", { class: "vocab-names" }, names.length ? names.join(", ") : h("span", { class: "muted" }, "none")),
    h("td", {}, formatDateTime(meeting.created_at)),
    h("td", {}, actions),
  );
  return row;
}

function assignRow(meeting, row) {
  document.getElementById(`assign-${meeting.id}`)?.remove();
  const checks = vocabularyChecks(`assign-${meeting.id}-vocab`, meeting.vocabulary_ids || []);
  const save = h("button", { type: "button", class: "primary" }, meeting.status === "live" ? "Save and apply now" : "Save");
  const editor = h(
    "tr",
    { id: `assign-${meeting.id}`, class: "assign-row" },
    h("td", { colspan: 6 }, h("div", { class: "stack" },
      h("span", { class: "label" }, `Vocabularies for “${meeting.title}”`),
      checks,
      h("div", { class: "inline-form" }, save, h("button", { type: "button", onclick: () => editor.remove() }, "Cancel")),
    )),
  );
  save.addEventListener("click", () =>
    busy(save, async () => {
      const ids = checkedIds(editor);
      await api("PATCH", `/api/meetings/${encodeURIComponent(meeting.id)}`, { vocabulary_ids: ids });
      if (meeting.status === "live") await api("POST", `/api/meetings/${encodeURIComponent(meeting.id)}/apply-vocabulary`);
      notify(meeting.status === "live" ? "Vocabularies saved and applied to the live meeting." : "Vocabularies saved.");
      await renderMeetings();
    }),
  );
  return editor;
}

async function lifecycle(button, meeting, verb) {
  if (verb === "end" && !confirm(`End “${meeting.title}”? Live participants are disconnected.`)) return;
  await busy(button, async () => {
    await api("POST", `/api/meetings/${encodeURIComponent(meeting.id)}/${verb}`);
    notify(verb === "start" ? `“${meeting.title}” is live.` : `“${meeting.title}” has ended.`);
    await renderMeetings();
  });
}
