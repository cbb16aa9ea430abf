// The dictation note's draft on this device: saved to localStorage as it changes, restored on return, and
// a warning before leaving the page with a note that was never copied or exported.

import { prefs } from "./dom.js";

export const LEAVE_WARNING =
  "Your note has not been copied or exported. It is kept as a draft on this device and comes back when you " +
  "return to Dictation. Leave anyway?";

export class NoteDraft {
  /**
   * note: the <textarea>; key: the storage key (per user); isDictating(): true while a dictation is live
   * (leaving then ends it, so the page warns even for a note that was already copied).
   */
  constructor({ note, key, isDictating = () => false }) {
    this.note = note;
    this.key = key;
    this.isDictating = isDictating;
    this.taken = ""; // the text as last copied or exported
    this.leaving = false; // set once the user confirmed leaving through an in-page link
    note.addEventListener("input", () => this.save());
  }

  /** Put a stored draft into an empty note; returns when it was saved (a Date) or null when none was. */
  restore() {
    const stored = this.read();
    if (!stored || !stored.text || this.note.value) return null;
    this.note.value = stored.text;
    if (stored.taken) this.taken = stored.text;
    return new Date(stored.savedAt);
  }

  /** Store the note as it is now (an empty note removes the draft). */
  save() {
    const text = this.note.value;
    if (!text.trim()) {
      prefs.remove(this.key);
      return;
    }
    prefs.set(this.key, JSON.stringify({ text, taken: text === this.taken, savedAt: Date.now() }));
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
