// The meeting view's log: every speaker's committed lines on the meeting's clock, each labelled with its
// speaker, plus one greyed tentative line per speaker that is talking now. A final replaces its speaker's
// partial in the same frame. Lines are kept in meeting-time order: a final that arrives late (from
// another server, through the database) is inserted where it belongs.

import { FollowingLog, clockTime, highlightTerms } from "./caption-view.js";
import { h } from "./dom.js";
import { toWritten } from "./written-form.js";

const STALE_PARTIAL_MS = 15_000; // a speaker whose stream vanished without a final stops looking "live"

/** The speaker's name of a final or partial (the socket sends {user_id, name}, the export a string). */
export function speakerName(message) {
  const speaker = message && message.speaker;
  if (typeof speaker === "string") return speaker;
  return (speaker && speaker.name) || "Unknown speaker";
}

function speakerId(message) {
  const speaker = message && message.speaker;
  if (speaker && typeof speaker === "object") return speaker.user_id ?? "";
  return message.user_id ?? "";
}

/** Order of two finals on the meeting's clock (then stream, then number: stable and total). */
export function compareFinals(a, b) {
  return (
    a.meeting_start_s - b.meeting_start_s ||
    a.meeting_end_s - b.meeting_end_s ||
    String(a.session_id).localeCompare(String(b.session_id)) ||
    a.seq - b.seq
  );
}

export class MeetingLog extends FollowingLog {
  /**
   * log: the role="log" element (polite live region: committed lines are announced); partials: an
   * aria-hidden box under it for the tentative lines; speak(text): reads a new live line aloud while
   * `announce` is on.
   */
  constructor({ log, partials, jumpButton = null, speak = null }) {
    super(log, jumpButton);
    this.partialsBox = partials;
    this.speak = speak;
    this.announce = false;
    this.finals = [];
    this.keys = new Set();
    this.partials = new Map(); // session_id -> {element, timer}
    this.placeholder = h("p", { class: "placeholder" }, "Captions of every speaker appear here.");
    log.replaceChildren(this.placeholder);
  }

  /** A committed line (history or live); a line already shown (same stream and number) is ignored. */
  addFinal(final, { live = false } = {}) {
    const key = `${final.session_id}:${final.seq}`;
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    this.placeholder.remove();
    this.clearPartial(final.session_id);
    let index = this.finals.length;
    while (index > 0 && compareFinals(this.finals[index - 1], final) > 0) index -= 1;
    const line = this.finalLine(final);
    if (index === this.finals.length) this.log.append(line);
    else this.log.querySelector(`[data-key="${CSS.escape(this.finals[index].key)}"]`).before(line);
    this.finals.splice(index, 0, { ...final, key });
    if (live && this.announce && this.speak) this.speak(`${speakerName(final)}: ${final.text}`);
    this.scroll();
    return true;
  }

  /** A speaker's tentative text; empty text removes it. */
  setPartial(partial) {
    const text = String(partial.text || "").replace(/\s+/g, " ").trim();
    if (!text) {
      this.clearPartial(partial.session_id);
      return;
    }
    let entry = this.partials.get(partial.session_id);
    if (!entry) {
      const element = h("p", { class: "partial", dataset: { session: partial.session_id, user: speakerId(partial) } });
      entry = { element, timer: 0 };
      this.partials.set(partial.session_id, entry);
      this.partialsBox.append(element);
    }
    entry.element.replaceChildren(h("span", { class: "speaker" }, speakerName(partial)), " ", text);
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => this.clearPartial(partial.session_id), STALE_PARTIAL_MS);
    this.partialsBox.hidden = false;
    this.scroll();
  }

  clearPartial(sessionId) {
    const entry = this.partials.get(sessionId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.element.remove();
    this.partials.delete(sessionId);
    this.partialsBox.hidden = this.partials.size === 0;
  }

  clearPartials() {
    for (const sessionId of [...this.partials.keys()]) this.clearPartial(sessionId);
  }

  /** A speaker renamed in this meeting: relabel their lines. */
  rename(userId, name) {
    for (const final of this.finals) {
      if (speakerId(final) === userId) final.speaker = { user_id: userId, name };
    }
    for (const label of this.log.querySelectorAll(`.line[data-user="${CSS.escape(String(userId))}"] .speaker`)) {
      label.textContent = name;
    }
  }

  /** A short system line (reconnected, ended); not a caption. */
  addNotice(text) {
    this.placeholder.remove();
    this.log.append(h("p", { class: "notice" }, text));
    this.scroll();
  }

  scroll() {
    if (this.follow) this.log.scrollTop = this.log.scrollHeight;
  }

  finalLine(final) {
    const start = Number(final.meeting_start_s) || 0;
    const title = `${clockTime(start)} – ${clockTime(final.meeting_end_s)} into the meeting`;
    return h(
      "p",
      { class: "line", title, dataset: { key: `${final.session_id}:${final.seq}`, user: speakerId(final), start } },
      h("span", { class: "time", "aria-hidden": "true" }, clockTime(start).replace(/\.\d$/, "")),
      h("span", { class: "speaker" }, speakerName(final)),
      h("span", { class: "visually-hidden" }, ": "),
      h("span", { class: "text" }, highlightTerms(this.written ? toWritten(final.text, final.matched_terms || []) : final.text, final.matched_terms)),
    );
  }
}
