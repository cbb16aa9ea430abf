// Caption export: pure functions from received `final` messages to WebVTT, SRT and plain text.
// No DOM access here, so the module can be tested by loading it in any page.

const MIN_CUE_MS = 10;
// A start this far before the previous cue's end means the stream's clock restarted (a new decoder
// stream after a reconnect), not an overlap; later cues are shifted to follow on.
const CLOCK_RESET_MS = 500;

/** Collapse whitespace (cue text may not contain blank lines); keep the casing exactly as received. */
export function cleanText(text) {
  return String(text ?? "").replace(/\s+/g, " ").trim();
}

/**
 * Order finals by (session, seq), drop duplicates and empty texts, and make the times usable in a
 * subtitle file: integer milliseconds, starts never decreasing, no overlaps, end > start.
 * Returns [{index, startMs, endMs, text}] with index counting from 1.
 */
export function normalizeCues(finals) {
  const cues = [];
  let prevEndMs = 0;
  let offsetMs = 0;
  for (const final of orderFinals(finals)) {
    let startMs = toMs(final.start_s) + offsetMs;
    let endMs = toMs(final.end_s) + offsetMs;
    if (startMs < prevEndMs - CLOCK_RESET_MS) {
      offsetMs += prevEndMs - startMs;
      endMs += prevEndMs - startMs;
      startMs = prevEndMs;
    }
    startMs = Math.max(startMs, prevEndMs);
    endMs = Math.max(endMs, startMs + MIN_CUE_MS);
    cues.push({ index: cues.length + 1, startMs, endMs, text: final.text });
    prevEndMs = endMs;
  }
  return cues;
}

// Sessions in the order they first appear (a page has one session at a time); within a session, by seq.
function orderFinals(finals) {
  const bySession = new Map();
  for (const final of finals || []) {
    const text = cleanText(final.text);
    if (!text) continue;
    const session = String(final.session_id ?? "");
    if (!bySession.has(session)) bySession.set(session, new Map());
    const group = bySession.get(session);
    const key = final.seq ?? `arrival-${group.size}`;
    if (!group.has(key)) group.set(key, { ...final, text });
  }
  const ordered = [];
  for (const group of bySession.values()) {
    ordered.push(...[...group.values()].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0)));
  }
  return ordered;
}

function toMs(seconds) {
  const value = Number(seconds);
  return Number.isFinite(value) && value > 0 ? Math.round(value * 1000) : 0;
}

/** Milliseconds -> "HH:MM:SS.mmm" (WebVTT, separator ".") or "HH:MM:SS,mmm" (SRT, separator ","). */
export function formatTimestamp(ms, separator = ".") {
  const total = Math.max(0, Math.round(ms));
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const seconds = Math.floor((total % 60_000) / 1000);
  const millis = total % 1000;
  const pad = (n, width = 2) => String(n).padStart(width, "0");
  return `${pad(hours)}:${pad(minutes)}:${pad(seconds)}${separator}${pad(millis, 3)}`;
}

function escapeVtt(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** A WebVTT document: numbered cues, monotonic times, text escaped (&, <, >). */
export function toWebVTT(finals, { title } = {}) {
  const header = title ? `WEBVTT - ${cleanText(title).replace(/-->/g, "→")}` : "WEBVTT";
  const blocks = normalizeCues(finals).map(
    (cue) =>
      `${cue.index}\n${formatTimestamp(cue.startMs)} --> ${formatTimestamp(cue.endMs)}\n${escapeVtt(cue.text)}`,
  );
  return [header, ...blocks].join("\n\n") + "\n";
}

/** A SubRip document: cues numbered from 1, "HH:MM:SS,mmm" times, CRLF line ends as most players expect. */
export function toSRT(finals) {
  const blocks = normalizeCues(finals).map(
    (cue) =>
      `${cue.index}\r\n${formatTimestamp(cue.startMs, ",")} --> ${formatTimestamp(cue.endMs, ",")}\r\n${cue.text}`,
  );
  return blocks.length ? blocks.join("\r\n\r\n") + "\r\n" : "";
}

/** Plain text: one finalized line per caption, in order. */
export function toPlainText(finals) {
  const lines = normalizeCues(finals).map((cue) => cue.text);
  return lines.length ? lines.join("\n") + "\n" : "";
}

/** The export formats the pages offer: key -> {label, extension, mime, render(finals, options)}. */
export const FORMATS = Object.freeze({
  vtt: { label: "WebVTT", extension: "vtt", mime: "text/vtt", render: toWebVTT },
  srt: { label: "SRT", extension: "srt", mime: "application/x-subrip", render: toSRT },
  text: { label: "Text", extension: "txt", mime: "text/plain", render: (finals) => toPlainText(finals) },
});

/** A file name like "weekly-standup-2026-12-02.vtt" from a meeting title. */
export function exportFilename(title, extension, date = new Date()) {
  const slug = cleanText(title)
    .toLowerCase()
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60);
  const day = date.toISOString().slice(0, 10);
  return `${slug || "captions"}-${day}.${extension}`;
}
