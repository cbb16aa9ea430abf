// "Add a recording" on one transcript (/transcripts?id=ID): the organiser (or an admin) uploads a recording of
// the meeting, the server decodes it into the transcript with the meeting's vocabulary
// (POST /api/meetings/{id}/recordings answers 202 with a job), and this asks how far the job is about once a
// second (GET .../recordings/{job}) until it is done or failed. docs/protocol.md, "Compatibility surfaces".

import { api, describeError } from "./api.js";
import { byId } from "./dom.js";

export const POLL_MS = 1000;
const RUNNING = new Set(["queued", "decoding"]);

/** "decoded 3.4 of 12.0 s" for a recording job (seconds of audio). */
export function decodedText(job) {
  const seconds = (s) => (Number(s) || 0).toFixed(1);
  return `decoded ${seconds(job.decoded_s)} of ${seconds(job.duration_s)} s`;
}

function say(text, tone = "") {
  const status = byId("recording-status");
  status.className = tone ? `ack ${tone}` : "ack";
  status.textContent = text;
}

function showProgress(job) {
  byId("recording-progress").hidden = false;
  byId("recording-name").textContent = job.filename;
  byId("recording-bar").value = job.progress;
  byId("recording-decoded").textContent = decodedText(job);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Upload `file`, then follow its job until it ends; resolves with the finished job, throws on failure. */
async function transcribe(meetingId, file) {
  const base = `/api/meetings/${encodeURIComponent(meetingId)}/recordings`;
  const body = new FormData();
  body.append("file", file, file.name);
  byId("recording-progress").hidden = true;
  say(`Uploading ${file.name}…`);
  let { recording: job } = await api("POST", base, body);
  say(`Transcribing ${file.name}…`);
  showProgress(job);
  while (RUNNING.has(job.status)) {
    await sleep(POLL_MS);
    ({ recording: job } = await api("GET", `${base}/${encodeURIComponent(job.id)}`));
    showProgress(job);
  }
  if (job.status !== "done") throw new Error(`the server could not transcribe it (${job.error || job.status})`);
  return job;
}

/**
 * Show the "Add a recording" control of meeting `meetingId` and handle its uploads one at a time;
 * `onDone(job)` is awaited once a recording's lines are stored (the page reloads the transcript).
 */
export function offerRecordingUpload(meetingId, onDone) {
  const form = byId("recording-form");
  const input = byId("recording-file");
  const button = form.querySelector("button[type=submit]");
  let busy = false;
  byId("recording").hidden = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = input.files && input.files[0];
    if (busy || !file) return;
    busy = true;
    input.disabled = true; // the button keeps the focus: aria-disabled, not disabled
    button.setAttribute("aria-disabled", "true");
    try {
      const job = await transcribe(meetingId, file);
      await onDone(job);
      const lines = `${job.finals} line${job.finals === 1 ? "" : "s"}`;
      say(`${job.filename}: ${lines} added to the transcript.`, "ok");
      form.reset();
    } catch (err) {
      say(`${file.name} was not added: ${describeError(err)}`, "error");
    } finally {
      busy = false;
      input.disabled = false;
      button.removeAttribute("aria-disabled");
    }
  });
}
