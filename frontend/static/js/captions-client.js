// WebSocket protocol v1 client (docs/protocol.md): ticket handshake, start/resume, audio frames,
// configure, stop, and automatic reconnect with exponential backoff that resumes the same session.
//
// States: idle -> connecting -> live -> stopping -> stopped
//                    ^   |        |
//                    |   v        v
//                  reconnecting <-+        (any) -> failed | ended
// Events (CustomEvent, payload in `detail`): state, ready, partial, final, lag, configured, notice,
// input_level, load.

import { api, ApiError } from "./api.js";
import { AudioRing } from "./audio-ring.js";

const SUBPROTOCOL = "captions.v1";
const SAMPLE_RATE = 16000;
const KEEPALIVE_AFTER_MS = 8000;
const STOP_TIMEOUT_MS = 15000;
const CONFIGURE_TIMEOUT_MS = 10000;
const MAX_BUFFERED_BYTES = 1 << 20; // beyond this the network is stalled: drop audio, not memory
// The last seconds of audio are kept: after a dropped connection or a server crash, `ready` says where the
// server's stored captions end and the client sends its audio again from there, together with what it
// captured while disconnected (the server accepts up to 30 s of it at once). Older audio is not captioned.
const RESEND_S = 30;
export const MAX_HELD_S = RESEND_S;
const PROBE_MS = 1000; // how often a disconnected page asks /readyz whether the server is back

const TRANSITIONS = {
  idle: ["connecting", "stopped"],
  connecting: ["live", "reconnecting", "failed", "stopped", "ended"],
  live: ["reconnecting", "stopping", "failed", "ended", "stopped"],
  reconnecting: ["connecting", "stopped", "failed"],
  stopping: ["stopped", "failed", "ended"],
  stopped: [],
  failed: [],
  ended: [],
};

/** Close codes after which reconnecting cannot help: the page shows the reason instead. */
const FATAL_CLOSE = new Map([
  [1000, "The session was ended by the server."],
  [1008, "The server closed the session (policy)."],
  [1009, "The server refused an audio frame that was too large."],
]);

function seconds(samples) {
  return Math.round((samples / SAMPLE_RATE) * 1e6) / 1e6;
}

export function chunkSamplesFor(chunkS) {
  return Math.round(Number(chunkS) * SAMPLE_RATE);
}

/** Backoff delay for attempt n (1-based): initial * 2^(n-1), capped, with +-20 % jitter. */
export function backoffDelayMs(attempt, { initialMs = 500, maxMs = 15000 } = {}, random = Math.random) {
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

export class CaptionsClient extends EventTarget {
  /**
   * meetingId: the meeting to join; chunkS: 0.56 or 1.12; wsUrl: defaults to this origin's /ws.
   * backoff: {initialMs, maxMs} for reconnect delays.
   */
  constructor({ meetingId, chunkS, wsUrl, backoff } = {}) {
    super();
    this.meetingId = meetingId;
    this.chunkS = Number(chunkS);
    this.wsUrl = wsUrl || defaultWsUrl();
    this.backoff = backoff || { initialMs: 500, maxMs: 15000 };
    this.state = "idle";
    this.socket = null;
    this.sessionId = null;
    this.resumeToken = null;
    this.resumeFailed = false;
    this.resumeConflict = false;
    this.lastSeq = 0;
    this.attempt = 0;
    this.retryTimer = null;
    this.keepaliveTimer = null;
    this.lastSentAt = 0;
    this.pendingConfigure = null;
    this.stopWaiter = null;
    this.droppedChunks = 0;
    this.sentS = 0; // audio sent since the last `ready`, seconds
    this.offsetS = null; // server's received audio minus sentS (learned from partials)
    this.ring = new AudioRing(RESEND_S * SAMPLE_RATE); // this session's audio, on its clock
    this.chunkSamples = chunkSamplesFor(this.chunkS);
    this.lastEndS = 0; // where the finals received so far end, session clock
    this.lostAt = null; // when the connection was lost (ms since epoch), until the next `ready`
    this.ready = null;
    this.probing = false; // a readiness probe loop runs while reconnecting
  }

  setState(next, detail = {}) {
    if (next === this.state) return;
    if (!TRANSITIONS[this.state].includes(next)) {
      throw new Error(`captions client: expected one of ${TRANSITIONS[this.state].join("/")}, got ${next}`);
    }
    this.state = next;
    this.emit("state", { state: next, ...detail });
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  /** Start streaming: ticket, socket, `start`. Progress and failures arrive as `state` events. */
  connect() {
    this.setState("connecting", { attempt: this.attempt });
    this.open();
  }

  async open() {
    let ticket;
    try {
      ticket = (await api("POST", `/api/meetings/${encodeURIComponent(this.meetingId)}/ticket`, {})).ticket;
    } catch (err) {
      if (this.state !== "connecting") return;
      const transient = !(err instanceof ApiError) || err.status === 0 || err.status >= 500 || err.status === 429;
      if (transient) this.scheduleReconnect(err.message);
      else this.setState("failed", { reason: err.message, status: err.status, code: err.code });
      return;
    }
    if (this.state !== "connecting") return;
    const socket = new WebSocket(this.wsUrl, [SUBPROTOCOL, `ticket.${ticket}`]);
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    socket.onopen = () => this.onOpen(socket);
    socket.onmessage = (event) => this.onMessage(socket, event);
    socket.onclose = (event) => this.onClose(socket, event);
  }

  onOpen(socket) {
    if (socket.protocol !== SUBPROTOCOL) {
      socket.close(1002, "unexpected subprotocol");
      return;
    }
    const start = { type: "start", chunk_s: this.chunkS };
    if (this.resumeToken) {
      start.resume_token = this.resumeToken;
      start.last_seq = this.lastSeq;
    } else {
      // A new session's clock starts at the audio not yet captioned (all of it, the first time).
      this.ring.rebase(this.lastEndS * SAMPLE_RATE);
      this.lastEndS = 0;
    }
    start.audio_s = seconds(this.ring.end);
    start.buffered_from_s = seconds(this.ring.start);
    this.sendJson(start);
  }

  onMessage(socket, event) {
    if (socket !== this.socket || typeof event.data !== "string") return;
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return; // the protocol only sends JSON text frames; ignore anything else
    }
    const handler = HANDLERS[message.type];
    if (handler) handler.call(this, message);
  }

  onReady(message) {
    if (this.sessionId && message.session_id !== this.sessionId) {
      this.lastSeq = 0; // a new session (the old one could not be resumed): seq restarts at 1
      this.emit("notice", { text: "Started a new caption session; earlier lines are kept on this page." });
    }
    this.sessionId = message.session_id;
    this.resumeToken = message.resume_token;
    this.ready = message;
    const resumed = this.attempt > 0;
    this.attempt = 0;
    this.sentS = 0;
    this.offsetS = null;
    this.chunkSamples = message.chunk_samples || this.chunkSamples;
    if (typeof message.resume_from_s === "number") this.ring.seek(message.resume_from_s * SAMPLE_RATE);
    this.startKeepalive();
    this.setState("live", { resumed });
    this.emit("ready", message);
    if (resumed && this.lostAt !== null) {
      const gap = message.not_captioned || null; // audio the server stored no captions for and will not get
      this.emit("gap", { lostAt: this.lostAt, resumedAt: Date.now(), from_s: gap && gap.from_s, to_s: gap && gap.to_s });
    }
    this.lostAt = null;
    this.pump();
  }

  onFinal(message) {
    if (typeof message.end_s === "number") this.lastEndS = Math.max(this.lastEndS, message.end_s);
    if (typeof message.seq === "number") {
      if (message.seq <= this.lastSeq) return; // replayed and already shown
      this.lastSeq = message.seq;
    }
    // Partials stop under load (the server drops them first), finals do not: estimate the lag from them.
    if (typeof message.audio_s === "number" && this.offsetS !== null) {
      this.emit("lag", { lag_s: Math.max(0, this.offsetS + this.sentS - message.audio_s) });
    }
    this.emit("final", { ...message, session_id: this.sessionId });
  }

  onConfigured(message) {
    if (this.pendingConfigure) this.pendingConfigure.resolve(message);
    this.pendingConfigure = null;
    this.emit("configured", message);
  }

  onError(message) {
    if (message.code === "invalid_terms" && this.pendingConfigure) {
      const err = new Error(message.message || "Some terms were rejected.");
      err.code = message.code;
      err.errors = message.errors || [];
      this.pendingConfigure.reject(err);
      this.pendingConfigure = null;
      return;
    }
    if (this.state === "connecting" && message.code === "resume_expired") {
      this.resumeToken = null; // expired or unknown: the next attempt starts a fresh session
      this.resumeFailed = true;
      return;
    }
    if (this.state === "connecting" && message.code === "resume_conflict") {
      this.resumeConflict = true; // another connection of this session is still closing: retry it soon
      return;
    }
    this.emit("notice", { text: message.message || message.code, code: message.code, error: true });
  }

  onStopped() {
    if (this.stopWaiter) this.stopWaiter();
  }

  onClose(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    this.stopKeepalive();
    if (this.pendingConfigure) {
      this.pendingConfigure.reject(new Error("The connection closed before the terms were acknowledged."));
      this.pendingConfigure = null;
    }
    if (this.state === "stopping" || this.state === "stopped") {
      if (this.stopWaiter) this.stopWaiter();
      return;
    }
    if (this.state !== "live" && this.state !== "connecting") return;
    if (this.lostAt === null && this.state === "live") this.lostAt = Date.now();
    if (this.resumeFailed) {
      this.resumeFailed = false;
      this.scheduleReconnect("Could not resume; starting a new session.", 1);
      return;
    }
    if (this.resumeConflict) {
      this.resumeConflict = false; // not "busy": the ordinary backoff, same session
      this.scheduleReconnect("The previous connection is still closing; resuming shortly.");
      return;
    }
    if (FATAL_CLOSE.has(event.code)) {
      this.setState(this.state === "live" ? "ended" : "failed", {
        reason: event.reason || FATAL_CLOSE.get(event.code),
        code: event.code,
      });
      return;
    }
    const reason = closeReason(event);
    this.scheduleReconnect(reason, event.code === 1012 ? 1 : undefined, event.code === 1013);
  }

  scheduleReconnect(reason, forcedAttempt, busy = false) {
    this.attempt = forcedAttempt || this.attempt + 1;
    const options = busy ? { ...this.backoff, initialMs: Math.max(5000, this.backoff.initialMs) } : this.backoff;
    const delayMs = backoffDelayMs(this.attempt, options);
    this.setState("reconnecting", { attempt: this.attempt, delayMs, reason, retryAt: Date.now() + delayMs });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.state === "reconnecting") this.connect();
    }, delayMs);
    if (!busy) this.watchForServer();
  }

  /**
   * While waiting to reconnect, ask the server's readiness probe about once a second (and listen for the
   * browser going back online): as soon as it answers, reconnect then rather than when the backoff timer
   * says (which by then may be seconds away). Not after "busy": the server asked us to wait.
   */
  watchForServer() {
    if (this.probing || typeof fetch !== "function") return;
    this.probing = true;
    const url = new URL("/readyz", this.wsUrl.replace(/^ws/, "http")).href;
    const online = () => this.retryNow();
    addEventListener("online", online);
    const probe = async () => {
      if (this.state !== "reconnecting" || this.retryTimer === null) {
        this.probing = false;
        removeEventListener("online", online);
        return;
      }
      let up = false;
      try {
        up = (await fetch(url, { cache: "no-store", credentials: "omit" })).ok;
      } catch {
        up = false; // still down
      }
      if (up && this.state === "reconnecting" && this.retryTimer !== null) this.retryNow();
      setTimeout(probe, PROBE_MS * (0.75 + 0.5 * Math.random())); // jittered: many pages do not knock at once
    };
    setTimeout(probe, PROBE_MS);
  }

  /** Seconds of captured audio the page holds that the server has not had yet (at most RESEND_S). */
  heldSeconds() {
    return seconds(this.ring.end - this.ring.cursor);
  }

  /** Skip the rest of the backoff wait. */
  retryNow() {
    if (this.state !== "reconnecting") return;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.connect();
  }

  /**
   * Take captured audio (ArrayBuffer of PCM16 LE): it joins the ring of recent audio and is sent in chunks
   * while live; while (re)connecting it waits for the next `ready`. Returns false if audio had to be dropped
   * (more than RESEND_S seconds were waiting).
   */
  sendAudio(buffer) {
    if (this.state !== "live" && this.state !== "connecting" && this.state !== "reconnecting") {
      this.droppedChunks += 1;
      return false;
    }
    const lostBefore = this.ring.lostSamples;
    this.ring.push(new Int16Array(buffer.slice(0)));
    if (this.state === "live") this.pump();
    if (this.ring.lostSamples === lostBefore) return true;
    this.droppedChunks += Math.ceil((this.ring.lostSamples - lostBefore) / this.chunkSamples);
    return false;
  }

  /** Send whole chunks from the ring's cursor while the socket keeps up. */
  pump() {
    const socket = this.socket;
    if (this.state !== "live" || !socket || socket.readyState !== WebSocket.OPEN) return;
    while (socket.bufferedAmount <= MAX_BUFFERED_BYTES) {
      const samples = this.ring.take(this.chunkSamples);
      if (!samples) break;
      socket.send(samples.buffer);
      this.sentS += this.chunkS;
      this.lastSentAt = Date.now();
    }
  }

  sendJson(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
      this.lastSentAt = Date.now();
      return true;
    }
    return false;
  }

  /** Replace the session's extra terms; resolves with the `configured` message (its `version`). */
  configure(terms) {
    if (this.state !== "live") return Promise.reject(new Error("Not connected: the terms apply from the next start."));
    if (this.pendingConfigure) this.pendingConfigure.reject(new Error("Superseded by a newer change."));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.pendingConfigure && this.pendingConfigure.resolve === done) this.pendingConfigure = null;
        reject(new Error("The server did not acknowledge the terms in time."));
      }, CONFIGURE_TIMEOUT_MS);
      const done = (value) => {
        clearTimeout(timer);
        resolve(value);
      };
      this.pendingConfigure = {
        resolve: done,
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.sendJson({ type: "configure", terms });
    });
  }

  /** Ask for the last finals and end the session; resolves once `stopped` arrived or the socket closed. */
  async stop() {
    if (this.state === "reconnecting" || this.state === "connecting" || this.state === "idle") {
      clearTimeout(this.retryTimer);
      this.closeSocket();
      this.setState("stopped", {});
      return;
    }
    if (this.state !== "live") return;
    this.setState("stopping", {});
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, STOP_TIMEOUT_MS);
      this.stopWaiter = () => {
        clearTimeout(timer);
        resolve();
      };
      if (!this.sendJson({ type: "stop" })) this.stopWaiter();
    });
    this.stopWaiter = null;
    this.closeSocket();
    if (this.state === "stopping") this.setState("stopped", {});
  }

  closeSocket() {
    this.stopKeepalive();
    const socket = this.socket;
    this.socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, "client done");
  }

  startKeepalive() {
    this.stopKeepalive();
    this.keepaliveTimer = setInterval(() => {
      if (Date.now() - this.lastSentAt >= KEEPALIVE_AFTER_MS) this.sendJson({ type: "keepalive" });
    }, KEEPALIVE_AFTER_MS / 2);
  }

  stopKeepalive() {
    clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = null;
  }
}

const HANDLERS = {
  ready: CaptionsClient.prototype.onReady,
  final: CaptionsClient.prototype.onFinal,
  configured: CaptionsClient.prototype.onConfigured,
  error: CaptionsClient.prototype.onError,
  stopped: CaptionsClient.prototype.onStopped,
  partial(message) {
    this.emit("partial", message);
    if (typeof message.lag_s === "number") {
      if (typeof message.audio_s === "number") this.offsetS = message.audio_s + message.lag_s - this.sentS;
      this.emit("lag", { lag_s: message.lag_s });
    }
  },
  lag(message) {
    this.emit("lag", message);
  },
  input_level(message) {
    this.emit("input_level", message); // the speaker's microphone is very quiet, too loud, or fine again
  },
  load(message) {
    this.emit("load", message); // the replica's degradation ladder (issue 37): what it gives up under load
  },
  reconnect(message) {
    this.emit("notice", { text: "The server is restarting; reconnecting…", code: "reconnect", reason: message.reason });
  },
  busy(message) {
    this.emit("notice", { text: message.message || "The server is busy; retrying shortly.", code: "busy" });
  },
};

function defaultWsUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws`;
}

function closeReason(event) {
  if (event.code === 1012) return "The server is restarting.";
  if (event.code === 1013) return "The server is busy.";
  if (event.code === 1011) return "The recognizer failed on the server.";
  return event.reason || "The connection was lost.";
}
