// Dictation page: stream into an editable note using the clinician's personal vocabularies; terms added
// on the page are saved to the list and sent to the live session with `configure`. Dictated numbers are
// shown in written form ("600 mg") unless the "Written numbers" preference is off; a pause or "new
// paragraph" starts a paragraph; the note is kept on this device and on the server.

import { api, describeError } from "./api.js";
import {
  MicrophoneCapture,
  bindAutoGain,
  captureUnavailableReason,
  fillMicrophoneSelect,
  rememberMicrophone,
  showInputLevel,
  showLevel,
} from "./audio-capture.js";
import { CaptionsClient, chunkSamplesFor } from "./captions-client.js";
import { latestNote, renderDictations, saveNote, showNoteState } from "./dictation-notes.js";
import { activeTermsText, renderTermList } from "./dictation-terms.js";
import { applyStoredDisplay, bindWrittenNumbers } from "./display-prefs.js";
import { byId, copyText, downloadText, formatDateTime, h } from "./dom.js";
import { exportFilename } from "./export.js";
import { requireUser } from "./login.js";
import { COMMANDS, dictate } from "./dictation-commands.js";
import { NoteDraft, PARAGRAPH_PAUSE_S } from "./note-draft.js";
import { toWritten } from "./written-form.js";

const ACTIVE_STATES = ["connecting", "live", "reconnecting", "stopping"];
const DEFAULT_CHUNK_S = 1.12; // until the dictation (and then the server's `ready`) says otherwise

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
  writtenNumbers: true,
  lastEndS: null, // end of the last final of this dictation (seconds), for the paragraph rule
  activeTerms: 0, // terms the recognizer boosts in this dictation (list + added on the page)
  ended: new Set(), // ids of the dictations this page has ended
  history: [], // the note before each dictated utterance, for "scratch that"
  dictated: null, // the note as dictation last left it (an edit in between forgets the history)
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
    remote: { save: saveRemoteDraft, onState: showDraftState },
  });
  const restored = page.draft.restore();
  if (restored) byId("copy-status").textContent = `Restored your unsaved note from ${formatDateTime(restored.toISOString())}.`;
  page.draft.guardLeaving(document.querySelectorAll(".topnav a"));
  page.writtenNumbers = bindWrittenNumbers(byId("written-numbers"), (on) => {
    page.writtenNumbers = on;
  });
  showCommands(byId("commands"));
  byId("start").addEventListener("click", start);
  byId("stop").addEventListener("click", stop);
  byId("copy").addEventListener("click", copyNote);
  byId("export").addEventListener("click", exportNote);
  byId("clear").addEventListener("click", clearNote);
  byId("add-term").addEventListener("submit", addTerm);
  byId("vocabulary").addEventListener("change", () => selectVocabulary(Number(byId("vocabulary").value)));
  byId("microphone").addEventListener("change", () => rememberMicrophone(byId("microphone").value));
  bindAutoGain(byId("auto-gain"));
  const unavailable = captureUnavailableReason();
  if (unavailable) {
    showError(unavailable.message);
    byId("start").disabled = true;
  }
  await Promise.all([loadVocabularies(), refreshMicrophones(), restoreRemoteDraft(page.draft.savedAt), loadDictations()]);
}

/** The spoken commands, as the page lists them. */
function showCommands(list) {
  list.replaceChildren(
    ...COMMANDS.map((c) =>
      h("li", {}, c.say.map((s) => `“${s}”`).join(" or "), " — ", c.help.length === 1 ? `types “${c.help}”` : c.help),
    ),
  );
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
  renderTermList(byId("terms"), page.vocabulary ? { ...page.vocabulary, terms } : null, termChanged, highlight);
}

/** A term was edited or removed on the server: show the list, and apply the change to a live dictation. */
async function termChanged(vocabulary, change) {
  page.vocabulary = vocabulary;
  renderTerms(vocabulary.terms);
  const shown = change.before.display || change.before.text;
  if (!page.client || page.client.state !== "live") {
    setAck("", change.kind === "remove" ? `Removed “${shown}”.` : `Saved. The change applies from the next dictation.`);
    return;
  }
  if (change.kind === "remove") page.activeTerms = Math.max(0, page.activeTerms - 1);
  setAck("pending", "Updating the recognizer…");
  try {
    await api("POST", `/api/meetings/${page.meeting.id}/apply-vocabulary`);
    // A term added during this dictation is also among the session's `configure` terms: change it there too.
    const kept = page.sessionTerms.filter((t) => t.text !== change.before.text);
    if (kept.length !== page.sessionTerms.length) {
      if (change.kind === "edit") kept.push(change.after.display ? change.after : { text: change.after.text });
      page.sessionTerms = kept;
      await page.client.configure(page.sessionTerms);
    }
    setAck("ok", `${change.kind === "remove" ? `Removed “${shown}”.` : "Saved."} ${activeTermsText(page.activeTerms)}`);
  } catch (err) {
    setAck("error", `Saved, but not applied to this dictation: ${describeError(err)}`);
  }
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
    page.activeTerms += 1;
    const latest = page.sessionTerms[page.sessionTerms.length - 1];
    setAck("ok", `“${latest.display || latest.text}” is active now. ${activeTermsText(page.activeTerms)}`);
    byId("ack").dataset.version = configured.version;
    byId("ack").title = `Vocabulary version ${shortVersion(configured.version)}`;
  } catch (err) {
    const detail = err.errors && err.errors.length ? err.errors.map((e) => `“${e.text}”: ${e.reason}`).join("; ") : err.message;
    setAck("error", `Not applied: ${detail}`);
  }
}

/** Versions are content hashes; eight characters are enough to tell them apart on screen. */
function shortVersion(version) {
  return String(version ?? "").slice(0, 8);
}

/** Add a final to the note: written form if chosen (its matched terms untouched), a paragraph after a pause. */
function addFinal(final) {
  const startS = Number(final.start_s);
  const pause = page.lastEndS !== null && startS - page.lastEndS > PARAGRAPH_PAUSE_S;
  page.lastEndS = Number(final.end_s);
  const keep = [...(final.matched_terms || []), ...((page.vocabulary && page.vocabulary.terms) || []).map((t) => t.display || t.text)];
  appendToNote(page.writtenNumbers ? toWritten(final.text, keep) : final.text, pause);
}

function appendToNote(text, newParagraph) {
  const note = byId("note");
  const before = note.value;
  if (before !== page.dictated) page.history = []; // edited by hand since: "scratch that" keeps the edit
  const { note: after, history } = dictate(before, text, { newParagraph, history: page.history });
  page.history = history;
  page.dictated = after;
  let common = 0;
  while (common < before.length && before[common] === after[common]) common += 1;
  const atEnd = note.selectionStart === before.length;
  note.setRangeText(after.slice(common), common, before.length, atEnd ? "end" : "preserve");
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
  // The microphone first: a refused or missing microphone must not leave an empty dictation behind.
  const capture = new MicrophoneCapture({
    chunkSamples: chunkSamplesFor(DEFAULT_CHUNK_S),
    deviceId: byId("microphone").value,
    autoGain: byId("auto-gain").checked,
    onChunk: (buffer) => page.client && page.client.sendAudio(buffer),
    onLevel: ({ rms }) => setLevel(rms),
  });
  try {
    await capture.start();
  } catch (err) {
    showError(describeError(err));
    byId("start").disabled = false;
    return;
  }
  try {
    const { meeting } = await api("POST", "/api/dictations", { title: `Dictation ${new Date().toLocaleString()}` });
    page.meeting = meeting;
  } catch (err) {
    await capture.stop();
    showError(describeError(err));
    byId("start").disabled = false;
    return;
  }
  page.capture = capture;
  capture.setChunkSamples(chunkSamplesFor(page.meeting.chunk_s || DEFAULT_CHUNK_S));
  page.lastEndS = null;
  page.draft.attachRemote();
  loadDictations();
  refreshMicrophones();
  page.sessionTerms = [];
  const client = new CaptionsClient({ meetingId: page.meeting.id, chunkS: page.meeting.chunk_s || 0.56 });
  page.client = client;
  client.addEventListener("state", (event) => onState(event.detail));
  client.addEventListener("ready", (event) => {
    if (page.client !== client || !ACTIVE_STATES.includes(client.state)) return; // stopped meanwhile
    page.capture && page.capture.setChunkSamples(event.detail.chunk_samples);
    page.activeTerms = (event.detail.terms || []).length + page.sessionTerms.length;
    setAck("ok", `Dictating. ${activeTermsText(page.activeTerms)}`);
    byId("ack").title = `Vocabulary version ${shortVersion(event.detail.vocabulary_version)}`;
  });
  client.addEventListener("partial", (event) => setPartial(event.detail.text, event.detail.utterance));
  client.addEventListener("final", (event) => {
    page.partial = { text: "", utterance: page.partial.utterance };
    byId("hearing").textContent = "";
    addFinal(event.detail);
  });
  client.addEventListener("lag", (event) => {
    byId("lag").hidden = false;
    byId("lag-value").textContent = Number(event.detail.lag_s || 0).toFixed(1);
    byId("lag").dataset.level = event.detail.lag_s < 1.5 ? "ok" : event.detail.lag_s < 4 ? "warn" : "bad";
  });
  client.addEventListener("notice", (event) => event.detail.error && showError(event.detail.text));
  client.addEventListener("input_level", (event) =>
    showInputLevel(byId("mic-banner"), byId("level-bar").parentElement, event.detail),
  );
  const focusWasHere = [byId("start"), document.body, null].includes(document.activeElement);
  byId("start").hidden = true;
  byId("stop").hidden = false;
  if (focusWasHere) byId("stop").focus(); // the button that replaced the one pressed, not <body>
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
  if (detail.state === "live") loadDictations();
  if (["stopped", "failed", "ended"].includes(detail.state)) finish(detail);
}

async function finish(detail) {
  if (detail.reason) showError(detail.reason);
  if (page.capture) await page.capture.stop();
  page.capture = null;
  setLevel(0);
  byId("lag").hidden = true;
  byId("hearing").textContent = "";
  const focusWasHere = [byId("stop"), document.body, null].includes(document.activeElement);
  byId("start").hidden = false;
  byId("start").disabled = false;
  byId("stop").hidden = true;
  if (focusWasHere) byId("start").focus();
  if (/^Dictating\.|is active now/.test(byId("ack").textContent)) setAck("", "Not dictating.");
  await endDictation();
}

/** End this page's dictation on the server, so it is listed as finished rather than live. */
async function endDictation() {
  const meeting = page.meeting;
  if (!meeting || page.ended.has(meeting.id)) return;
  page.ended.add(meeting.id);
  try {
    const body = await api("POST", `/api/meetings/${meeting.id}/end`);
    if (page.meeting && page.meeting.id === meeting.id) page.meeting = body.meeting;
  } catch (err) {
    page.ended.delete(meeting.id);
    showError(`The dictation could not be marked as finished: ${describeError(err)}`);
  }
  await page.draft.flushRemote();
  await loadDictations();
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

function saveRemoteDraft(text) {
  return page.meeting ? saveNote(page.meeting.id, text) : Promise.resolve();
}

function showDraftState(state, err) {
  showNoteState(byId("draft-status"), state, err);
}

function loadDictations() {
  return renderDictations(byId("dictations"), page.user.id);
}

/** The latest note kept in the account, when it is newer than this device's copy (written elsewhere). */
async function restoreRemoteDraft(localSavedAt) {
  let latest;
  try {
    latest = await latestNote();
  } catch (err) {
    showDraftState("error", err);
    return;
  }
  if (!latest || page.meeting) return; // nothing kept, or a dictation started meanwhile: keep what is shown
  const note = byId("note");
  page.meeting = { id: latest.meeting_id, title: latest.title };
  const newer = !localSavedAt || new Date(latest.updated_at) > localSavedAt;
  const untouched = !note.value || note.value === (page.draft.read() || {}).text;
  if (newer && untouched && latest.text !== note.value) {
    note.value = latest.text;
    page.draft.save();
    byId("copy-status").textContent = `Restored your note from ${formatDateTime(latest.updated_at)} (saved in your account).`;
  }
  page.draft.attachRemote(latest.text);
}

function clearNote() {
  if (byId("note").value && !confirm("Clear the whole note?")) return;
  byId("note").value = "";
  page.draft.save();
  page.draft.flushRemote();
  byId("note").focus();
}

main().catch((err) => showError(describeError(err)));
