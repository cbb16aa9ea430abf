// Dictation: the notes kept on the server (/api/drafts) and the list of the user's dictations.

import { api, describeError } from "./api.js";
import { formatDateTime, h } from "./dom.js";

const DICTATION_LABELS = { scheduled: "Not started", live: "Live", ended: "Finished" };
const DRAFT_STATES = {
  saving: () => "Saving to your account…",
  saved: () => "Saved to your account.",
  error: (err) => `Not saved to your account (${err ? describeError(err) : "error"}); kept on this device.`,
};

/** Save `text` as the note of dictation `meetingId` (an empty text removes it). */
export async function saveNote(meetingId, text) {
  await api("PUT", `/api/drafts/${meetingId}`, { text });
}

/** The user's most recently saved note ({meeting_id, title, updated_at, text}), or null when none is kept. */
export async function latestNote() {
  const { drafts } = await api("GET", "/api/drafts");
  if (!drafts.length) return null;
  const { draft } = await api("GET", `/api/drafts/${drafts[0].meeting_id}`);
  return { ...draft, title: drafts[0].title };
}

/** Say in `line` whether the note is saved to the account ("saving", "saved" or "error"). */
export function showNoteState(line, state, err) {
  line.dataset.state = state;
  line.textContent = DRAFT_STATES[state] ? DRAFT_STATES[state](err) : "";
}

/** List the user's latest dictations in `list`: when (a link to its transcript), and whether live or finished. */
export async function renderDictations(list, userId) {
  let meetings;
  try {
    ({ meetings } = await api("GET", "/api/meetings"));
  } catch {
    return; // the list is a convenience; dictating works without it
  }
  const mine = meetings.filter((m) => m.kind === "dictation" && m.owner_id === userId).slice(0, 8);
  if (!mine.length) {
    list.replaceChildren(h("li", { class: "muted" }, "None yet."));
    return;
  }
  list.replaceChildren(
    ...mine.map((m) =>
      h(
        "li",
        { dataset: { meetingId: m.id, status: m.status } },
        h("a", { href: `/transcripts?id=${m.id}` }, formatDateTime(m.started_at || m.created_at)),
        " ",
        h("span", { class: `pill small status-${m.status}` }, DICTATION_LABELS[m.status] || m.status),
      ),
    ),
  );
}
