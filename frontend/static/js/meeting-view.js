// Meeting view page (/meeting?id=ID for members, /meeting#link=TOKEN for guests with a viewer link):
// every speaker's captions, read-only, over /ws/view (protocol "captions.view.v1", docs/protocol.md).

import { api, describeError, me } from "./api.js";
import { applyStoredDisplay, bindDisplayControls, bindWrittenNumbers, MEETING_WRITTEN } from "./display-prefs.js";
import { byId } from "./dom.js";
import { requireUser } from "./login.js";
import { bindReadAloud, speakLine } from "./read-aloud.js";
import { MeetingLog } from "./meeting-log.js";

const SUBPROTOCOL = "captions.view.v1";
const RETRY_MS = [1000, 2000, 4000, 8000, 15000];
const STATE_TEXT = {
  idle: "Not connected",
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  ended: "Meeting ended",
  failed: "Not connected",
};
/** What the page says for each typed refusal of a viewer link. */
const LINK_ERRORS = {
  link_revoked: "This view-only link was revoked by the meeting's organiser. Ask them for a new one.",
  link_expired: "This view-only link has expired. Ask the meeting's organiser for a new one.",
  link_unknown: "This view-only link is not valid. Check that you copied all of it, or ask the organiser for a new one.",
};

/** How the page words each speaker's status (the server's "speaker_status" message). */
const SPEAKER_TEXT = { live: "live", reconnecting: "reconnecting", stopped: "stopped" };

const page = { meeting: null, user: null, link: null, log: null, socket: null, attempt: 0, timer: 0, closed: false };
/** Each speaking session's latest status: session_id -> { user_id, name, state }. */
const speakers = new Map();

function showError(text, code = "") {
  const banner = byId("page-error");
  banner.textContent = text || "";
  banner.dataset.code = code;
  banner.hidden = !text;
}

function setConnection(state) {
  byId("connection").dataset.state = state;
  byId("connection-text").textContent = STATE_TEXT[state] || state;
  if (state === "live") showSpeakers();
}

/** The per-speaker list ("Dr Lee live", "Nurse Joy reconnecting"); the badge says "Live" only while
 * someone speaks. */
function showSpeakers() {
  const list = byId("speaker-list");
  list.replaceChildren();
  for (const speaker of speakers.values()) {
    const item = document.createElement("li");
    item.className = "pill small";
    item.dataset.state = speaker.state;
    const dot = document.createElement("span");
    dot.className = "dot";
    dot.setAttribute("aria-hidden", "true");
    item.append(dot, `${speaker.name || "A speaker"} ${SPEAKER_TEXT[speaker.state] || speaker.state}`);
    list.append(item);
  }
  const connection = byId("connection");
  if (connection.dataset.state === "live") {
    const anyoneLive = [...speakers.values()].some((s) => s.state === "live");
    byId("connection-text").textContent = anyoneLive ? STATE_TEXT.live : "No one is speaking";
  }
}

function onSpeakerStatus(message) {
  const { user_id, name } = message.speaker;
  for (const [id, other] of speakers) {  // one line per person: a new session replaces their stopped one
    if (id !== message.session_id && other.user_id === user_id && other.state === "stopped") speakers.delete(id);
  }
  speakers.set(message.session_id, { user_id, name, state: message.state });
  showSpeakers();
}

function linkToken() {
  const match = /(?:^|[#&])link=([^&]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

async function main() {
  applyStoredDisplay();
  page.link = linkToken();
  if (page.link) {
    document.querySelector(".topnav").hidden = true; // a guest: Meetings and Admin only lead to a login
    await openLink();
    return;
  }
  const meetingId = new URLSearchParams(location.search).get("id");
  page.user = await requireUser(
    byId("login"),
    "Log in to follow this meeting. No account? Ask the meeting's organiser for a view-only link.",
  );
  if (!meetingId) {
    showError("No meeting chosen. Open one from the meetings page, or use the view-only link the organiser sent you.");
    return;
  }
  try {
    page.meeting = (await api("GET", `/api/meetings/${encodeURIComponent(meetingId)}`)).meeting;
  } catch (err) {
    showError(err.status === 404 ? `There is no meeting with the ID “${meetingId}”.` : describeError(err));
    return;
  }
  setup();
  bindMemberControls();
  if (page.meeting.status === "ended") await showEnded();
  else connect();
}

async function openLink() {
  try {
    page.meeting = (await api("POST", "/api/viewer-links/open", { token: page.link })).meeting;
  } catch (err) {
    showError(LINK_ERRORS[err.code] || describeError(err), err.code || "");
    return;
  }
  setup();
  byId("guest-note").hidden = false;
  if (await me().catch(() => null)) {
    byId("guest-note").hidden = true;
    document.querySelector(".topnav").hidden = false; // a member following a link: their pages
  }
  connect();
}

function setup() {
  const meeting = page.meeting;
  document.title = `${meeting.title} — Meeting view`;
  byId("meeting-title").textContent = meeting.title;
  byId("captions").hidden = false;
  byId("status-group").hidden = false;
  page.log = new MeetingLog({ log: byId("caption-log"), partials: byId("partials"), jumpButton: byId("jump"), speak: speakLine });
  bindDisplayControls({ smaller: byId("font-smaller"), larger: byId("font-larger"), readout: byId("font-size"), contrast: byId("contrast") });
  page.log.written = bindWrittenNumbers(byId("written-numbers"), (on) => (page.log.written = on), MEETING_WRITTEN);
  bindReadAloud(byId("announce"), page.log);
  byId("retry").addEventListener("click", () => {
    clearTimeout(page.timer);
    connect();
  });
  addEventListener("pagehide", () => {
    page.closed = true;
    if (page.socket) page.socket.close(1000);
  });
}

function bindMemberControls() {
  const id = encodeURIComponent(page.meeting.id);
  const speak = byId("speak");
  speak.href = `/?meeting=${id}`;
  speak.hidden = page.meeting.status === "ended";
  for (const link of document.querySelectorAll("#server-export a")) {
    link.href = `/api/meetings/${id}/captions?format=${link.dataset.format}`;
    link.setAttribute("download", "");
  }
  byId("open-transcript").href = `/transcripts?id=${id}`; // to read, search and correct it afterwards
  byId("export-bar").hidden = false;
  bindNameForm();
}

async function bindNameForm() {
  const form = byId("name-form");
  const input = byId("display-name");
  const status = byId("name-status");
  const path = `/api/meetings/${encodeURIComponent(page.meeting.id)}/participants`;
  try {
    const { participants } = await api("GET", path);
    const mine = participants.find((p) => p.user_id === page.user.id);
    input.value = mine ? mine.name : page.user.username;
  } catch {
    input.value = page.user.username;
  }
  form.hidden = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "";
    try {
      const { participant } = await api("PUT", `${path}/${page.user.id}`, { display_name: input.value });
      input.value = participant.name || page.user.username;
      page.log.rename(page.user.id, input.value);
      status.textContent = "Saved.";
    } catch (err) {
      status.textContent = describeError(err);
    }
  });
}

/** A finished meeting: its captions from the export, no socket. */
async function showEnded() {
  setConnection("ended");
  try {
    const { captions } = await api("GET", `/api/meetings/${encodeURIComponent(page.meeting.id)}/captions?format=json`);
    for (const final of captions) page.log.addFinal(final);
  } catch (err) {
    showError(describeError(err));
  }
  page.log.addNotice("This meeting has ended.");
}

async function credential() {
  if (page.link) return `link.${page.link}`;
  const { ticket } = await api("POST", `/api/meetings/${encodeURIComponent(page.meeting.id)}/ticket`);
  return `ticket.${ticket}`;
}

async function connect() {
  byId("retry").hidden = true;
  setConnection(page.attempt ? "reconnecting" : "connecting");
  let protocol;
  try {
    if (page.link && page.attempt) await api("POST", "/api/viewer-links/open", { token: page.link });
    protocol = await credential();
  } catch (err) {
    if (LINK_ERRORS[err.code]) return fail(LINK_ERRORS[err.code], err.code);
    if (err.code === "ended") return showEnded();
    if (err.status && err.status < 500) return fail(describeError(err), err.code);
    return retryLater();
  }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/view`, [SUBPROTOCOL, protocol]);
  page.socket = socket;
  let lastError = null;
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "error") lastError = message;
    onMessage(message);
  });
  socket.addEventListener("close", (event) => onClose(event, lastError));
}

function onMessage(message) {
  const log = page.log;
  if (message.type === "ready") {
    byId("caption-log").setAttribute("aria-busy", "true");
    if (page.attempt) log.addNotice("Reconnected.");
    page.attempt = 0;
    log.clearPartials();
    speakers.clear(); // the server tells again where each speaker stands
    showSpeakers();
  } else if (message.type === "caught_up") {
    byId("caption-log").removeAttribute("aria-busy");
    setConnection(message.ended ? "ended" : "live");
  } else if (message.type === "final") {
    log.addFinal(message, { live: byId("caption-log").getAttribute("aria-busy") !== "true" });
  } else if (message.type === "partial") {
    log.setPartial(message);
  } else if (message.type === "speaker_status") {
    onSpeakerStatus(message);
  } else if (message.type === "speaker") {
    log.rename(message.user_id, message.name);
    for (const speaker of speakers.values()) if (speaker.user_id === message.user_id) speaker.name = message.name;
    showSpeakers();
  } else if (message.type === "ended") {
    log.clearPartials();
    speakers.clear();
    showSpeakers();
    log.addNotice("The meeting has ended.");
    byId("speak").hidden = true;
  }
}

function onClose(event, lastError) {
  page.socket = null;
  page.log.clearPartials();
  if (page.closed) return;
  if (event.code === 1000) {
    setConnection("ended");
    return;
  }
  if (lastError && LINK_ERRORS[lastError.code]) return fail(LINK_ERRORS[lastError.code], lastError.code);
  if (event.code === 1008) return fail(lastError ? lastError.message : "The server refused the meeting view.", lastError && lastError.code);
  retryLater();
}

function retryLater() {
  const delay = RETRY_MS[Math.min(page.attempt, RETRY_MS.length - 1)];
  page.attempt += 1;
  setConnection("reconnecting");
  byId("retry").hidden = false;
  page.timer = setTimeout(connect, delay);
}

function fail(text, code) {
  setConnection("failed");
  showError(text, code || "");
}

main().catch((err) => showError(describeError(err)));
