// Microphone capture: getUserMedia -> AudioWorklet (pcm-worklet.js) -> PCM16 chunks and a level.
// Errors are turned into sentences a participant can act on.

import { prefs } from "./dom.js";

const WORKLET_URL = new URL("./pcm-worklet.js", import.meta.url);
const DEVICE_PREF = "microphone";
const AUTO_GAIN_PREF = "autoGain";

/** An error the page shows as is: `kind` is insecure | unsupported | denied | absent | busy | failed. */
export class CaptureError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = "CaptureError";
    this.kind = kind;
  }
}

/** Why capture cannot work on this page at all, or null. Checked before asking for the microphone. */
export function captureUnavailableReason() {
  if (!window.isSecureContext) {
    return new CaptureError(
      "insecure",
      "The microphone only works on a secure page. Open this address with https:// (or on localhost).",
    );
  }
  if (!navigator.mediaDevices?.getUserMedia || typeof AudioWorkletNode === "undefined") {
    return new CaptureError("unsupported", "This browser cannot capture audio. Use a current Chrome, Edge, Firefox or Safari.");
  }
  return null;
}

function explain(err) {
  switch (err && err.name) {
    case "NotAllowedError":
    case "SecurityError":
      return new CaptureError(
        "denied",
        "Microphone access was denied. Allow the microphone for this site in the browser's address bar, then press Start again.",
      );
    case "NotFoundError":
    case "OverconstrainedError":
      return new CaptureError("absent", "No microphone was found. Connect one (or pick another device) and press Start again.");
    case "NotReadableError":
    case "AbortError":
      return new CaptureError("busy", "The microphone is in use by another application or could not be opened.");
    default:
      return new CaptureError("failed", `The microphone could not be started: ${err && err.message ? err.message : err}`);
  }
}

/** The audio inputs, with labels once permission was granted. */
export async function listMicrophones() {
  if (!navigator.mediaDevices?.enumerateDevices) return [];
  const devices = await navigator.mediaDevices.enumerateDevices();
  return devices.filter((device) => device.kind === "audioinput");
}

export function rememberedMicrophone() {
  return prefs.get(DEVICE_PREF, "");
}

export function rememberMicrophone(deviceId) {
  prefs.set(DEVICE_PREF, deviceId || "");
}

/**
 * A checkbox for the browser's automatic gain (on unless the speaker turned it off; remembered). Off, the
 * server's own per-stream gain raises quiet speech and its level meter says when the microphone is too quiet.
 */
export function bindAutoGain(checkbox) {
  checkbox.checked = prefs.get(AUTO_GAIN_PREF, "on") !== "off";
  checkbox.addEventListener("change", () => prefs.set(AUTO_GAIN_PREF, checkbox.checked ? "on" : "off"));
}

/**
 * A running capture. `onChunk(ArrayBuffer)` receives exactly `chunkSamples` PCM16 LE samples at 16 kHz;
 * `onLevel({rms, peak})` about 20 times a second. Call `stop()` to flush the last (zero-padded) chunk.
 */
export class MicrophoneCapture {
  constructor({ chunkSamples, deviceId, onChunk, onLevel, autoGain = true }) {
    this.chunkSamples = chunkSamples;
    this.autoGain = autoGain;
    this.deviceId = deviceId || "";
    this.onChunk = onChunk;
    this.onLevel = onLevel || (() => {});
    this.context = null;
    this.stream = null;
    this.node = null;
  }

  async start() {
    const unavailable = captureUnavailableReason();
    if (unavailable) throw unavailable;
    const audio = {
      channelCount: 1,
      echoCancellation: true,
      noiseSuppression: false,
      autoGainControl: this.autoGain,
    };
    if (this.deviceId) audio.deviceId = { exact: this.deviceId };
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({ audio });
    } catch (err) {
      if (this.deviceId && (err.name === "OverconstrainedError" || err.name === "NotFoundError")) {
        this.deviceId = ""; // the remembered device is gone: fall back to the default one
        delete audio.deviceId;
        try {
          this.stream = await navigator.mediaDevices.getUserMedia({ audio });
        } catch (retryErr) {
          throw explain(retryErr);
        }
      } else {
        throw explain(err);
      }
    }
    await this.connect();
    const track = this.stream.getAudioTracks()[0];
    const settings = track ? track.getSettings() : {};
    if (settings.deviceId) rememberMicrophone(settings.deviceId);
    return { deviceId: settings.deviceId || "", label: track ? track.label : "" };
  }

  async connect() {
    try {
      this.context = new AudioContext({ latencyHint: "interactive" });
      await this.context.audioWorklet.addModule(WORKLET_URL);
      const source = this.context.createMediaStreamSource(this.stream);
      this.node = new AudioWorkletNode(this.context, "pcm-chunker", {
        numberOfInputs: 1,
        numberOfOutputs: 1,
        outputChannelCount: [1],
        processorOptions: { chunkSamples: this.chunkSamples },
      });
      this.node.port.onmessage = (event) => this.onMessage(event.data);
      source.connect(this.node);
      this.node.connect(this.context.destination); // pulls the graph; the node outputs silence
      if (this.context.state === "suspended") await this.context.resume();
    } catch (err) {
      this.release();
      throw new CaptureError("failed", `Audio processing could not start: ${err.message || err}`);
    }
  }

  /** Follow the server's `chunk_samples` (from `ready`) if it differs from what the meeting said. */
  setChunkSamples(chunkSamples) {
    if (chunkSamples === this.chunkSamples) return;
    this.chunkSamples = chunkSamples;
    if (this.node) this.node.port.postMessage({ type: "chunk-samples", chunkSamples });
  }

  onMessage(message) {
    if (message.type === "chunk") this.onChunk(message.buffer);
    else if (message.type === "level") this.onLevel(message);
    else if (message.type === "flushed" && this.flushed) this.flushed();
  }

  /** Stop the microphone; resolves after the last partial chunk was delivered. */
  async stop() {
    if (this.node) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 500);
        this.flushed = () => {
          clearTimeout(timer);
          resolve();
        };
        this.node.port.postMessage({ type: "flush" });
      });
    }
    this.release();
  }

  release() {
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    if (this.node) this.node.disconnect();
    if (this.context) this.context.close().catch(() => {});
    this.stream = null;
    this.node = null;
    this.context = null;
  }
}

/** Show an RMS level (0..1 linear) on a bar element as -60..0 dBFS. */
export function showLevel(bar, rms) {
  const db = 20 * Math.log10(Math.max(rms, 1e-6));
  const level = Math.max(0, Math.min(1, (db + 60) / 60));
  bar.style.transform = `scaleX(${level.toFixed(3)})`;
}

/**
 * The server's `input_level` message (its level meter hears the speech it decodes): say on `banner` that
 * the microphone is very quiet or too loud, and mark the level bar's meter; state "ok" clears both.
 */
export function showInputLevel(banner, meter, message) {
  const text = message.state === "ok" ? "" : message.message || "";
  if (banner.textContent !== text) banner.textContent = text;
  banner.hidden = !text;
  banner.dataset.state = message.state;
  if (meter) meter.dataset.state = message.state;
}

/** Fill a <select> with the audio inputs and pre-select the remembered one. */
export async function fillMicrophoneSelect(select) {
  const devices = await listMicrophones().catch(() => []);
  const options = devices.map((device, i) => {
    const option = document.createElement("option");
    option.value = device.deviceId;
    option.textContent = device.label || `Microphone ${i + 1}`;
    return option;
  });
  if (!devices.some((device) => device.deviceId === "default")) {
    const fallback = document.createElement("option");
    fallback.value = "";
    fallback.textContent = "Default microphone";
    options.unshift(fallback);
  }
  select.replaceChildren(...options);
  const remembered = rememberedMicrophone();
  if (devices.some((device) => device.deviceId === remembered)) select.value = remembered;
}
