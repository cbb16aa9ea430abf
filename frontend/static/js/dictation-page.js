// Dictation page: stream into an editable note using the clinician's personal vocabularies; terms added
// on the page are saved to the list and sent to the live session with `configure`.

import { api, describeError } from "./api.js";
import {
  MicrophoneCapture,
  captureUnavailableReason,
  fillMicrophoneSelect,
  rememberMicrophone,
  showLevel,
} from "./audio-capture.js";
import { CaptionsClient, chunkSamplesFor } from "./captions-client.js";
import { applyStoredDisplay } from "./display-prefs.js";
import { byId, copyText, downloadText, formatDateTime, h } from "./dom.js";
import { exportFilename } from "./export.js";
import { requireUser } from "./login.js";
import { NoteDraft } from "./note-draft.js";

const ACTIVE_STATES = ["connecting", "live", "reconnecting", "stopping"];

const page = {
  user: null,
  vocabularies: [],
  vocabulary: null,
  sessionTerms: [],
  meeting: null,
  client: null,
  capture: null,
  draft: null,
  partial: { text: "", utterance: null },
};

function showError(text) {
  byId("page-error").textContent = text || "";
  byId("page-error").hidden = !text;
}

function setConnection(state, text) {
  byId("connection").dataset.state = state;
  byId("connection-text").textContent = text;
  byId("connection-detail").textContent = "";
}

async function main() {
  applyStoredDisplay();
  page.user = await requireUser(byId("login"), "Log in to dictate with your personal term lists.");
  byId("dictation").hidden = false;
  byId("status-group").hidden = false;
  page.draft = new NoteDraft({
    note: byId("note"),
    key: `dictationDraft.${page.user.id}`,
    isDictating: () => Boolean(page.client && ACTIVE_STATES.includes(page.client.state)),
  });
  const restored = page.draft.restore();
  if (restored) byId("copy-status").textContent = `Restored your unsaved note from ${formatDateTime(restored.toISOString())}.`;
  page.draft.guardLeaving(document.querySelectorAll(".topnav a"));
  byId("start").addEventListener("click", start);
  byId("stop").addEventListener("click", stop);
  byId("copy").addEventListener("click", copyNote);
  byId("export").addEventListener("click", exportNote);
  byId("clear").addEventListener("click", clearNote);
  byId("add-term").addEventListener("submit", addTerm);
  byId("vocabulary").addEventListener("change", () => selectVocabulary(Number(byId("vocabulary").value)));
  byId("microphone").addEventListener("change", () => rememberMicrophone(byId("microphone").value));
  const unavailable = captureUnavailableReason();
  if (unavailable) {
    showError(unavailable.message);
    byId("start").disabled = true;
  }
  await Promise.all([loadVocabularies(), refreshMicrophones()]);
}

function refreshMicrophones() {
  return fillMicrophoneSelect(byId("microphone"));
}

async function loadVocabularies() {
  const { vocabularies } = await api("GET", "/api/vocabularies");
  page.vocabularies = vocabularies.filter((v) => v.personal && v.owner_id === page.user.id);
  const select = byId("vocabulary");
  select.replaceChildren(...page.vocabularies.map((v) => h("option", { value: v.id }, v.name)));
  if (!page.vocabularies.length) {
    select.replaceChildren(h("option", { value: "" }, "My terms (created when you add a term)"));
    renderTerms([]);
    return;
  }
  await selectVocabulary(page.vocabularies[0].id);
}

async function selectVocabulary(id) {
  if (!id) return;
  const { vocabulary } = await api("GET", `/api/vocabularies/${id}`);
  page.vocabulary = vocabulary;
  byId("vocabulary").value = String(id);
  renderTerms(vocabulary.terms);
}

function renderTerms(terms, highlight = null) {
  const list = byId("terms");
  if (!terms.length) {
    list.replaceChildren(h("li", { class: "muted" }, "No terms yet."));
    return;
  }
  list.replaceChildren(
    ...terms.map((t) =>
      h("li", { class: t.text === highlight ? "new" : "", title: `weight ${t.weight}` }, t.display || t.text),
    ),
  );
}

async function ensureVocabulary() {
  if (page.vocabulary) return page.vocabulary;
  const { vocabulary } = await api("POST", "/api/vocabularies", { name: "My terms", personal: true });
  page.vocabularies = [vocabulary];
  byId("vocabulary").replaceChildren(h("option", { value: vocabulary.id }, vocabulary.name));
  page.vocabulary = { ...vocabulary, terms: vocabulary.terms || [] };
  return page.vocabulary;
}

async function addTerm(event) {
  event.preventDefault();
  const input = byId("term-text");
  const errorLine = byId("term-error");
  const text = input.value.trim();
  const display = byId("term-display").value.trim();
  errorLine.textContent = "";
  input.removeAttribute("aria-invalid");
  if (!text) {
    errorLine.textContent = "Type the term first.";
    input.setAttribute("aria-invalid", "true");
    input.focus();
    return;
  }
  const term = display ? { text, display } : { text };
  try {
    const vocabulary = await ensureVocabulary();
    const body = await api("POST", `/api/vocabularies/${vocabulary.id}/terms`, { terms: [term] });
    page.vocabulary = body.vocabulary;
    renderTerms(body.vocabulary.terms, text);
  } catch (err) {
    const reason = err.errors && err.errors[0] ? err.errors[0].reason : describeError(err);
    errorLine.textContent = `“${text}” was not added: ${reason}`;
    input.setAttribute("aria-invalid", "true");
    return;
  }
  input.value = "";
  byId("term-display").value = "";
  input.focus();
  if (page.client && page.client.state === "live") {
    page.sessionTerms.push(term);
    await sendTerms();
  } else {
    setAck("", `Saved. “${text}” will be used from the next dictation.`);
  }
}

function setAck(kind, text) {
  const ack = byId("ack");
  ack.className = `ack ${kind}`;
  ack.textContent = text;
}

async function sendTerms() {
  setAck("pending", "Sending the new terms to the recognizer…");
  try {
    const configured = await page.client.configure(page.sessionTerms);
    const count = configured.terms ? configured.terms.length : page.sessionTerms.length;
    setAck("ok", `Active now: vocabulary version ${shortVersion(configured.version)} (${count} term${count === 1 ? "" : "s"} added this dictation).`);
    byId("ack").dataset.version = configured.version;
    byId("ack").title = `Vocabulary version ${configured.version}`;
  } catch (err) {
    const detail = err.errors && err.errors.length ? err.errors.map((e) => `“${e.text}”: ${e.reason}`).join("; ") : err.message;
    setAck("error", `Not applied: ${detail}`);
  }
}

/** Versions are content hashes; eight characters are enough to tell them apart on screen. */
function shortVersion(version) {
  return String(version ?? "").slice(0, 8);
}

function appendToNote(text) {
  const note = byId("note");
  const atEnd = note.selectionStart === note.value.length;
  const needsSpace = note.value && !/\s$/.test(note.value);
  note.setRangeText((needsSpace ? " " : "") + text, note.value.length, note.value.length, atEnd ? "end" : "preserve");
  if (atEnd) note.scrollTop = note.scrollHeight;
  page.draft.save();
}

function setPartial(text, utterance) {
  const clean = String(text || "").trim();
  const current = page.partial;
  if (utterance === current.utterance && clean.length < current.text.length && current.text.startsWith(clean)) return;
  page.partial = { text: clean, utterance };
  requestAnimationFrame(() => {
    byId("hearing").textContent = page.partial.text ? `${page.partial.text} …` : "";
  });
}

async function start() {
  showError("");
  byId("start").disabled = true;
  try {
    const { meeting } = await api("POST", "/api/dictations", { title: `Dictation ${new Date().toLocaleString()}` });
    page.meeting = meeting;
    page.capture = new MicrophoneCapture({
      chunkSamples: chunkSamplesFor(meeting.chunk_s || 0.56),
      deviceId: byId("microphone").value,
      onChunk: (buffer) => page.client && page.client.sendAudio(buffer),
      onLevel: ({ rms }) => setLevel(rms),
    });
    await page.capture.start();
  } catch (err) {
    page.capture = null;
    showError(describeError(err));
    byId("start").disabled = false;
    return;
  }
  refreshMicrophones();
  page.sessionTerms = [];
  const client = new CaptionsClient({ meetingId: page.meeting.id, chunkS: page.meeting.chunk_s || 0.56 });
  page.client = client;
  client.addEventListener("state", (event) => onState(event.detail));
  client.addEventListener("ready", (event) => {
    page.capture && page.capture.setChunkSamples(event.detail.chunk_samples);
    const terms = event.detail.terms || [];
    setAck("ok", `Dictating with vocabulary version ${shortVersion(event.detail.vocabulary_version)} (${terms.length} terms).`);
  });
  client.addEventListener("partial", (event) => setPartial(event.detail.text, event.detail.utterance));
  client.addEventListener("final", (event) => {
    page.partial = { text: "", utterance: page.partial.utterance };
    byId("hearing").textContent = "";
    appendToNote(event.detail.text);
  });
  client.addEventListener("lag", (event) => {
    byId("lag").hidden = false;
    byId("lag-value").textContent = Number(event.detail.lag_s || 0).toFixed(1);
    byId("lag").dataset.level = event.detail.lag_s < 1.5 ? "ok" : event.detail.lag_s < 4 ? "warn" : "bad";
  });
  client.addEventListener("notice", (event) => event.detail.error && showError(event.detail.text));
  byId("start").hidden = true;
  byId("stop").hidden = false;
  client.connect();
}

function onState(detail) {
  const labels = {
    connecting: "Connecting…",
    live: "Dictating",
    reconnecting: `Reconnecting (attempt ${detail.attempt})…`,
    stopping: "Finishing…",
    stopped: "Not dictating",
    failed: "Not connected",
    ended: "Ended",
  };
  setConnection(detail.state, labels[detail.state] || detail.state);
  if (["stopped", "failed", "ended"].includes(detail.state)) finish(detail);
}

async function finish(detail) {
  if (detail.reason) showError(detail.reason);
  if (page.capture) await page.capture.stop();
  page.capture = null;
  setLevel(0);
  byId("lag").hidden = true;
  byId("hearing").textContent = "";
  byId("start").hidden = false;
  byId("start").disabled = false;
  byId("stop").hidden = true;
}

async function stop() {
  byId("stop").disabled = true;
  if (page.capture) await page.capture.stop();
  page.capture = null;
  if (page.client) await page.client.stop();
  byId("stop").disabled = false;
}

function setLevel(rms) {
  showLevel(byId("level-bar"), rms);
}

async function copyNote() {
  const ok = await copyText(byId("note").value);
  if (ok) page.draft.markTaken();
  byId("copy-status").textContent = ok ? "Copied to the clipboard." : "Copy failed: select the text and press Ctrl+C.";
}

function exportNote() {
  const text = byId("note").value.replace(/\s+$/, "") + "\n";
  downloadText(exportFilename(page.meeting ? page.meeting.title : "dictation", "txt"), text);
  page.draft.markTaken();
}

function clearNote() {
  if (byId("note").value && !confirm("Clear the whole note?")) return;
  byId("note").value = "";
  page.draft.save();
  byId("note").focus();
}

main().catch((err) => showError(describeError(err)));
