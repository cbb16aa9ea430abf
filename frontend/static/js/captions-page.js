// Captions page (/?meeting=ID): join, capture the microphone, stream, show and export captions.

import { api, describeError, me } from "./api.js";
import {
  MicrophoneCapture,
  bindAutoGain,
  captureUnavailableReason,
  fillMicrophoneSelect,
  rememberMicrophone,
  showInputLevel,
  showLevel,
} from "./audio-capture.js";
import { CaptionView } from "./caption-view.js";
import { CaptionsClient, MAX_HELD_S, chunkSamplesFor } from "./captions-client.js";
import { applyStoredDisplay, bindDisplayControls, bindWrittenNumbers, MEETING_WRITTEN } from "./display-prefs.js";
import { byId, downloadText, h, prefs } from "./dom.js";
import { FORMATS, exportFilename } from "./export.js";
import { requireUser } from "./login.js";
import { bindReadAloud, speakLine } from "./read-aloud.js";

const STATE_TEXT = {
  idle: "Not connected",
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  stopping: "Finishing…",
  stopped: "Stopped",
  failed: "Not connected",
  ended: "Ended",
};

const page = {
  user: null,
  meeting: null,
  client: null,
  capture: null,
  view: null,
  countdown: 0,
};

function showError(text) {
  const banner = byId("page-error");
  banner.textContent = text || "";
  banner.hidden = !text;
}

/** `text` is announced (role=status); `detail` (a countdown) is only shown, not re-announced each tick. */
function setConnection(state, text, detail = "") {
  byId("connection").dataset.state = state;
  const label = byId("connection-text");
  const next = text || STATE_TEXT[state] || state;
  if (label.textContent !== next) label.textContent = next;
  byId("connection-detail").textContent = detail;
}

async function main() {
  applyStoredDisplay();
  if (/(?:^|[#&])link=/.test(location.hash)) {
    location.replace(`/meeting${location.hash}`); // a view-only link opened on the wrong page
    return;
  }
  const meetingId = new URLSearchParams(location.search).get("meeting");
  page.user = await requireUser(
    byId("login"),
    meetingId
      ? "Log in to caption or follow this meeting. No account? You can follow it only through a view-only link from its organiser."
      : "Log in to caption a meeting.",
  );
  if (!meetingId) {
    await showPicker();
    return;
  }
  try {
    const body = await api("GET", `/api/meetings/${encodeURIComponent(meetingId)}`);
    page.meeting = body.meeting || body;
  } catch (err) {
    showError(err.status === 404 ? `There is no meeting with the ID “${meetingId}”.` : describeError(err));
    await showPicker();
    return;
  }
  setupCaptions();
}

async function showPicker() {
  byId("picker").hidden = false;
  const list = byId("meeting-list");
  try {
    const { meetings } = await api("GET", "/api/meetings");
    const joinable = meetings.filter((m) => m.kind !== "dictation" && m.status !== "ended");
    list.replaceChildren(
      ...joinable.map((m) =>
        h(
          "li",
          {},
          h("a", { href: `/?meeting=${encodeURIComponent(m.id)}` }, m.title),
          " ",
          h("span", { class: `pill small status-${m.status}` }, m.status),
          h("a", { class: "follow", href: `/meeting?id=${encodeURIComponent(m.id)}`, "aria-label": `Follow ${m.title} (view only)` }, "Follow"),
        ),
      ),
    );
    if (!joinable.length) {
      list.replaceChildren(h("li", { class: "muted" }, "No meetings are open right now. Start one below."));
    }
  } catch (err) {
    list.replaceChildren(h("li", { class: "error" }, describeError(err)));
  }
  byId("meeting-form").addEventListener("submit", (event) => {
    event.preventDefault();
    location.search = `?meeting=${encodeURIComponent(byId("meeting-id").value.trim())}`;
  });
  byId("create-meeting").addEventListener("submit", createMeeting);
}

/** Create a meeting (the caller owns it), start it, and open it for captioning. */
async function createMeeting(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const button = form.querySelector("button");
  const error = byId("create-error");
  error.textContent = "";
  button.disabled = true;
  try {
    const { meeting } = await api("POST", "/api/meetings", { title: byId("new-meeting-title").value.trim() });
    await api("POST", `/api/meetings/${encodeURIComponent(meeting.id)}/start`);
    location.search = `?meeting=${encodeURIComponent(meeting.id)}`;
  } catch (err) {
    error.textContent = describeError(err);
    button.disabled = false;
  }
}

function setupCaptions() {
  const meeting = page.meeting;
  document.title = `${meeting.title} — Live captions`;
  byId("meeting-title").textContent = meeting.title;
  byId("captions").hidden = false;
  byId("status-group").hidden = false;
  const info = byId("chunk-info");
  info.textContent = `${Number(meeting.chunk_s).toFixed(2)} s chunks`;
  info.title = "Audio is sent in chunks of this length; shorter chunks give faster captions.";
  info.hidden = false;
  page.view = new CaptionView({ log: byId("caption-log"), jumpButton: byId("jump"), speak: speakLine });
  page.view.written = bindWrittenNumbers(byId("written-numbers"), (on) => (page.view.written = on), MEETING_WRITTEN);
  bindDisplayControls({
    smaller: byId("font-smaller"),
    larger: byId("font-larger"),
    readout: byId("font-size"),
    contrast: byId("contrast"),
  });
  bindReadAloud(byId("announce"), page.view);
  bindExports();
  byId("follow").href = `/meeting?id=${encodeURIComponent(meeting.id)}`;
  byId("start").addEventListener("click", start);
  byId("stop").addEventListener("click", stop);
  byId("retry").addEventListener("click", () => page.client && page.client.retryNow());
  byId("microphone").addEventListener("change", onMicrophoneChange);
  bindAutoGain(byId("auto-gain"));
  const unavailable = captureUnavailableReason();
  if (unavailable) {
    showError(unavailable.message);
    byId("start").disabled = true;
  }
  if (meeting.status === "ended") {
    showError("This meeting has ended. You can still export its captions.");
    byId("start").disabled = true;
  }
  refreshMicrophones();
  addEventListener("beforeunload", (event) => {
    if (page.client && page.client.state === "live") event.preventDefault();
  });
}

function refreshMicrophones() {
  return fillMicrophoneSelect(byId("microphone"));
}

async function onMicrophoneChange() {
  const deviceId = byId("microphone").value;
  rememberMicrophone(deviceId);
  if (!page.capture) return;
  await page.capture.stop();
  page.capture = null;
  await startCapture();
}

function setLevel(rms) {
  showLevel(byId("level-bar"), rms);
}

async function startCapture() {
  const capture = new MicrophoneCapture({
    chunkSamples: chunkSamplesFor(page.meeting.chunk_s),
    deviceId: byId("microphone").value,
    autoGain: byId("auto-gain").checked,
    onChunk: (buffer) => page.client && page.client.sendAudio(buffer),
    onLevel: ({ rms }) => setLevel(rms),
  });
  await capture.start();
  page.capture = capture;
  await refreshMicrophones();
}

async function start() {
  showError("");
  const startButton = byId("start");
  startButton.disabled = true;
  try {
    await startCapture();
  } catch (err) {
    showError(err.message);
    startButton.disabled = false;
    return;
  }
  const client = new CaptionsClient({ meetingId: page.meeting.id, chunkS: page.meeting.chunk_s });
  page.client = client;
  client.addEventListener("state", (event) => onState(event.detail));
  client.addEventListener("ready", (event) => {
    if (page.capture) page.capture.setChunkSamples(event.detail.chunk_samples);
    showLoad(event.detail.load);
  });
  client.addEventListener("load", (event) => showLoad(event.detail));
  client.addEventListener("input_level", (event) =>
    showInputLevel(byId("mic-banner"), byId("level-bar").parentElement, event.detail),
  );
  client.addEventListener("partial", (event) => {
    flushNotice();
    page.view.setPartial(event.detail.text, event.detail.utterance);
  });
  client.addEventListener("final", (event) => {
    if (typeof event.detail.audio_s === "number") flushNotice(); // replayed finals come first, then live ones
    page.view.addFinal(event.detail);
  });
  client.addEventListener("gap", (event) => noticeAfterReplay(gapText(event.detail)));
  client.addEventListener("lag", (event) => showLag(event.detail.lag_s));
  client.addEventListener("notice", (event) => {
    if (event.detail.code === "busy") showBanner(BUSY_TEXT);
    if (event.detail.error) showError(event.detail.text);
    else page.view.addNotice(event.detail.text);
  });
  const focusWasHere = [startButton, document.body, null].includes(document.activeElement);
  startButton.hidden = true;
  byId("stop").hidden = false;
  if (focusWasHere) byId("stop").focus(); // the button that replaced the one pressed, not <body>
  client.connect();
  askForName();
}

/**
 * The first time someone without a display name speaks, ask how captions should name them (else their
 * username, "admin", labels their lines in the meeting view and the exports). Asked once per browser.
 */
async function askForName() {
  if (page.user && page.user.display_name === undefined) page.user = (await me().catch(() => null)) || page.user;
  const user = page.user;
  if (!user || user.display_name || prefs.get(`nameAsked.${user.id}`)) return;
  const form = byId("name-ask");
  const input = byId("name-ask-input");
  const status = byId("name-ask-status");
  input.value = "";
  form.hidden = false;
  const done = (text) => {
    prefs.set(`nameAsked.${user.id}`, "1");
    form.hidden = true;
    if (text) page.view.addNotice(text);
  };
  form.onsubmit = async (event) => {
    event.preventDefault();
    status.textContent = "";
    try {
      const body = await api("PATCH", "/api/auth/me", { display_name: input.value });
      page.user = { ...user, display_name: body.user.display_name };
      done(`Your captions are labelled “${body.user.display_name}”.`);
    } catch (err) {
      status.textContent = describeError(err);
    }
  };
  byId("name-ask-skip").onclick = () => done("");
}

const LOST_TEXT =
  "Connection lost. Keep talking: this page holds the last 30 s of your audio and captions it as soon as " +
  "the server is back (it reconnects by itself; “Reconnect now” tries at once).";
const BUSY_TEXT =
  "The server is busy right now. Keep this page open: it retries by itself and catches up on what you say.";

/** The server's load (its degradation ladder): while it is simplifying captions, say what and why. */
function showLoad(load) {
  const banner = byId("load-banner");
  const text = load && load.rung > 0 ? `${load.message} Your captions continue.` : "";
  if (banner.textContent !== text) banner.textContent = text;
  banner.hidden = !text;
}

/** A speaker's banner for a lost connection or an overloaded server: what is happening and what to do. */
function showBanner(text) {
  const banner = byId("connection-banner");
  if (banner.textContent !== text) banner.textContent = text;
  banner.hidden = !text;
}

function onState(detail) {
  clearInterval(page.countdown);
  if (detail.state === "reconnecting") showBanner(byId("connection-banner").textContent === BUSY_TEXT ? BUSY_TEXT : LOST_TEXT);
  else if (detail.state !== "connecting") showBanner("");
  byId("retry").hidden = detail.state !== "reconnecting";
  if (detail.state === "reconnecting") {
    const tick = () => {
      const seconds = Math.max(0, Math.ceil((detail.retryAt - Date.now()) / 1000));
      const held = page.client ? Math.round(page.client.heldSeconds()) : 0;
      const holding = held ? ` · ${held} s of audio held (up to ${MAX_HELD_S} s)` : "";
      setConnection("reconnecting", "Reconnecting…", `in ${seconds} s · attempt ${detail.attempt}${holding}`);
    };
    tick();
    page.countdown = setInterval(tick, 500);
    byId("lag").hidden = true;
    return;
  }
  setConnection(detail.state);
  if (detail.state === "live" && detail.resumed) noticeAfterReplay("Reconnected.");
  if (["stopped", "failed", "ended"].includes(detail.state)) finish(detail);
}

// A reconnect notice goes below the line the outage interrupted: that line's final is replayed after
// `ready`, so the notice waits for the first live message (or a moment).
function noticeAfterReplay(text) {
  page.pendingNotice = page.pendingNotice ? `${page.pendingNotice} ${text}` : text;
  clearTimeout(page.noticeTimer);
  page.noticeTimer = setTimeout(flushNotice, 1500);
}

function flushNotice() {
  clearTimeout(page.noticeTimer);
  if (page.pendingNotice) page.view.addNotice(page.pendingNotice);
  page.pendingNotice = null;
}

function clockTime(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function gapText({ lostAt, resumedAt, from_s: fromS, to_s: toS }) {
  const outage = `Connection lost ${clockTime(lostAt)}–${clockTime(resumedAt)}`;
  if (typeof fromS !== "number") return `${outage}; the audio held meanwhile was captioned.`;
  return `${outage}; ${Math.round(toS - fromS)} s of audio could not be captioned (it may have been silence).`;
}

async function finish(detail) {
  if (detail.status === 401) showError("Your login has expired. Reload the page to log in again.");
  else if (detail.reason) showError(`Captioning stopped: ${detail.reason}`);
  byId("lag").hidden = true;
  if (page.capture) {
    await page.capture.stop();
    page.capture = null;
  }
  setLevel(0);
  const startButton = byId("start");
  startButton.hidden = false;
  startButton.disabled = false;
  startButton.textContent = "Start again";
  const focusWasHere = [byId("stop"), document.body, null].includes(document.activeElement);
  byId("stop").hidden = true;
  if (focusWasHere) startButton.focus();
}

async function stop() {
  const stopButton = byId("stop");
  stopButton.disabled = true;
  stopButton.textContent = "Stopping…";
  if (page.capture) {
    await page.capture.stop(); // delivers the last, zero-padded chunk before `stop`
    page.capture = null;
  }
  if (page.client) await page.client.stop();
  stopButton.disabled = false;
  stopButton.textContent = "Stop";
}

function showLag(lagS) {
  const lag = byId("lag");
  const value = Number(lagS) || 0;
  lag.hidden = false;
  byId("lag-value").textContent = value.toFixed(1);
  lag.dataset.level = value < 1.5 ? "ok" : value < 4 ? "warn" : "bad";
  lag.title = "How far the captions are behind your voice.";
}

function bindExports() {
  for (const button of document.querySelectorAll("[data-export]")) {
    button.addEventListener("click", () => {
      const format = FORMATS[button.dataset.export];
      const content = format.render(page.view.finals, { title: page.meeting.title });
      downloadText(exportFilename(page.meeting.title, format.extension), content, format.mime);
    });
  }
  for (const link of document.querySelectorAll("#server-export a")) {
    link.href = `/api/meetings/${encodeURIComponent(page.meeting.id)}/captions?format=${link.dataset.format}`;
    link.setAttribute("download", "");
  }
}

main().catch((err) => showError(describeError(err)));
