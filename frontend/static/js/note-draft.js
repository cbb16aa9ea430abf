// The dictation note's draft: saved to localStorage as it changes and, once the note belongs to a dictation,
// to the server too (debounced), restored on return; a warning before leaving the page with a note that was
// never copied or exported. Also how dictated text joins the note (paragraphs after pauses or on command).

import { dictate } from "./dictation-commands.js";
import { prefs } from "./dom.js";

export const LEAVE_WARNING =
  "Your note has not been copied or exported. It is kept as a draft on this device and comes back when you " +
  "return to Dictation. Leave anyway?";

/** A pause longer than this (seconds, between one final's end and the next one's start) starts a paragraph. */
export const PARAGRAPH_PAUSE_S = 2;
/** How long after the last change the note is saved to the server. */
export const SERVER_SAVE_DELAY_MS = 1000;

/**
 * The note after dictated `text` is added at its end, its spoken commands carried out ("new paragraph",
 * "full stop", "scratch that"...: `dictation-commands.js`); `newParagraph`: a long pause came before it.
 */
export function appendDictated(note, text, newParagraph = false) {
  return dictate(note, text, { newParagraph }).note;
}

export class NoteDraft {
  /**
   * note: the <textarea>; key: the storage key (per user); isDictating(): true while a dictation is live
   * (leaving then ends it, so the page warns even for a note that was already copied). remote: optional
   * `{save(text) -> Promise, onState(state, detail)}`; saving to it starts once `remoteReady` is set.
   */
  constructor({ note, key, isDictating = () => false, remote = null }) {
    this.note = note;
    this.key = key;
    this.isDictating = isDictating;
    this.remote = remote;
    this.remoteReady = false; // true once the note belongs to a dictation the server can keep it for
    this.remoteText = null; // the text the server holds, as far as this page knows
    this.remoteTimer = 0;
    this.taken = ""; // the text as last copied or exported
    this.leaving = false; // set once the user confirmed leaving through an in-page link
    note.addEventListener("input", () => this.save());
  }

  /** The server holds `text` (just restored from it, or saved); later edits are saved after a pause. */
  attachRemote(text = null) {
    this.remoteReady = true;
    if (text !== null) this.remoteText = text;
    this.scheduleRemote();
  }

  scheduleRemote() {
    if (!this.remote || !this.remoteReady) return;
    clearTimeout(this.remoteTimer);
    if (this.note.value !== (this.remoteText ?? "")) this.remote.onState?.("saving");
    this.remoteTimer = setTimeout(() => this.flushRemote(), SERVER_SAVE_DELAY_MS);
  }

  /** Send the note to the server now if it changed since the last save; resolves when done. */
  async flushRemote() {
    clearTimeout(this.remoteTimer);
    const text = this.note.value;
    if (!this.remote || !this.remoteReady || text === (this.remoteText ?? "")) return;
    this.remote.onState?.("saving");
    try {
      await this.remote.save(text);
      this.remoteText = text;
      this.remote.onState?.(text === this.note.value ? "saved" : "saving");
    } catch (err) {
      this.remote.onState?.("error", err);
    }
  }

  /** Put a stored draft into an empty note; returns when it was saved (a Date) or null when none was. */
  restore() {
    const stored = this.read();
    if (!stored || !stored.text || this.note.value) return null;
    this.note.value = stored.text;
    if (stored.taken) this.taken = stored.text;
    return new Date(stored.savedAt);
  }

  /** Store the note as it is now (an empty note is stored as empty, so an older copy on the server does not
   * come back in its place). */
  save() {
    const text = this.note.value.trim() ? this.note.value : "";
    prefs.set(this.key, JSON.stringify({ text, taken: text === this.taken, savedAt: Date.now() }));
    this.scheduleRemote();
  }

  /** When this device's copy was last saved (a Date), or null when it holds none. */
  get savedAt() {
    const stored = this.read();
    return stored && stored.savedAt ? new Date(stored.savedAt) : null;
  }

  /** The note was copied or exported as it is now. */
  markTaken() {
    this.taken = this.note.value;
    this.save();
  }

  /** True when leaving would lose something the user has not taken elsewhere. */
  get unsaved() {
    return this.isDictating() || (this.note.value.trim() !== "" && this.note.value !== this.taken);
  }

  /** Warn before the page unloads, and ask before following one of `links` away, while `unsaved`. */
  guardLeaving(links) {
    addEventListener("beforeunload", (event) => {
      if (this.leaving || !this.unsaved) return;
      this.save();
      event.preventDefault();
      event.returnValue = "";
    });
    for (const link of links) {
      link.addEventListener("click", (event) => {
        const newTab = event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey;
        if (newTab || !this.unsaved) return;
        this.save();
        if (confirm(LEAVE_WARNING)) this.leaving = true;
        else event.preventDefault();
      });
    }
  }

  read() {
    try {
      const stored = JSON.parse(prefs.get(this.key, "null"));
      return stored && typeof stored.text === "string" ? stored : null;
    } catch {
      return null; // not JSON (written by something else): no draft
    }
  }
}
