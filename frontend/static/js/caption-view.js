// The caption log: committed lines plus one tentative tail. All DOM changes of a frame are applied
// together in requestAnimationFrame, so a final replaces its partial without a visible gap.

import { h } from "./dom.js";
import { toWritten } from "./written-form.js";

const FOLLOW_SLACK_PX = 40;

/** "m:ss.s" (or "h:mm:ss.s") for hover titles. */
export function clockTime(seconds) {
  const total = Math.max(0, Number(seconds) || 0);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = (total % 60).toFixed(1).padStart(4, "0");
  return hours ? `${hours}:${String(minutes).padStart(2, "0")}:${secs}` : `${minutes}:${secs}`;
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function termStrings(matchedTerms) {
  const out = new Set();
  for (const term of matchedTerms || []) {
    if (typeof term === "string") out.add(term);
    else if (term && typeof term === "object") {
      for (const key of ["display", "text", "term"]) if (term[key]) out.add(String(term[key]));
    }
  }
  return [...out].filter((t) => t.trim()).sort((a, b) => b.length - a.length);
}

/**
 * Split `text` into text nodes and <mark> elements for each whole-word, case-insensitive occurrence of
 * a matched term (longest first, no overlaps).
 */
export function highlightTerms(text, matchedTerms) {
  const terms = termStrings(matchedTerms);
  if (!terms.length) return [document.createTextNode(text)];
  const pattern = new RegExp(
    `(?<![\\p{L}\\p{N}])(?:${terms.map(escapeRegExp).join("|")})(?![\\p{L}\\p{N}])`,
    "giu",
  );
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    nodes.push(h("mark", { class: "term" }, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

/** A role="log" element that keeps the newest line in view unless the reader scrolled up (then the
 * "Jump to latest" button shows); the captions page's view and the meeting view share it. */
export class FollowingLog {
  constructor(log, jumpButton = null) {
    this.log = log;
    this.jumpButton = jumpButton;
    this.follow = true;
    log.addEventListener("scroll", () => this.onScroll(), { passive: true });
    if (jumpButton) jumpButton.addEventListener("click", () => this.jumpToLatest());
  }

  onScroll() {
    const { scrollTop, scrollHeight, clientHeight } = this.log;
    this.follow = scrollHeight - scrollTop - clientHeight <= FOLLOW_SLACK_PX;
    if (this.jumpButton) this.jumpButton.hidden = this.follow;
  }

  jumpToLatest() {
    this.follow = true;
    this.log.scrollTop = this.log.scrollHeight;
    if (this.jumpButton) this.jumpButton.hidden = true;
  }
}

export class CaptionView extends FollowingLog {
  /**
   * log: the role="log" element (a polite live region: screen readers hear each committed line; the
   * partial tail is aria-hidden so it is never announced). speak(text): called with each committed line
   * while `announce` is on (the page reads it aloud).
   */
  constructor({ log, jumpButton, speak = null }) {
    super(log, jumpButton);
    this.speak = speak;
    this.announce = false;
    this.finals = [];
    this.queue = [];
    this.partial = { text: "", utterance: null };
    this.partialDirty = false;
    this.frame = 0;
    this.tail = h("p", { class: "partial empty", "aria-hidden": "true" });
    this.placeholder = h("p", { class: "placeholder" }, "Captions appear here once you start.");
    log.replaceChildren(this.placeholder, this.tail);
  }

  /** A tentative text for `utterance`; a shorter prefix of what is shown is ignored (no flicker). */
  setPartial(text, utterance) {
    const current = this.partial;
    const clean = String(text || "").replace(/\s+/g, " ").trim();
    if (utterance === current.utterance && clean.length < current.text.length && current.text.startsWith(clean)) {
      return;
    }
    if (clean === current.text && utterance === current.utterance) return;
    this.partial = { text: clean, utterance };
    this.partialDirty = true;
    this.schedule();
  }

  /** A committed line; replaces the partial in the same frame. */
  addFinal(final) {
    this.finals.push(final);
    this.queue.push(final);
    this.partial = { text: "", utterance: this.partial.utterance };
    this.partialDirty = true;
    this.schedule();
  }

  /** A short system line in the log (reconnected, new session); not part of exports. */
  addNotice(text) {
    this.queue.push({ notice: text });
    this.schedule();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  render() {
    this.frame = 0;
    if (this.queue.length) {
      this.placeholder.remove();
      const lines = this.queue.map((item) => (item.notice ? this.noticeLine(item.notice) : this.finalLine(item)));
      this.tail.before(...lines);
      if (this.announce && this.speak) {
        for (const item of this.queue) if (!item.notice) this.speak(item.text);
      }
      this.queue = [];
    }
    if (this.partialDirty) {
      this.tail.textContent = this.partial.text;
      this.tail.classList.toggle("empty", !this.partial.text);
      this.partialDirty = false;
      if (this.partial.text) this.placeholder.remove();
    }
    if (this.follow) this.log.scrollTop = this.log.scrollHeight;
  }

  finalLine(final) {
    const title = `${clockTime(final.start_s)} – ${clockTime(final.end_s)}`;
    const text = this.written ? toWritten(final.text, final.matched_terms || []) : final.text;
    return h(
      "p",
      { class: "line", title, dataset: { seq: final.seq ?? "", start: final.start_s ?? "" } },
      highlightTerms(text, final.matched_terms),
    );
  }

  noticeLine(text) {
    return h("p", { class: "notice" }, text);
  }
}
