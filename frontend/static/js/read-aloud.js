// "Read new lines aloud": the browser's speech synthesis for sighted users (the captions page and the
// meeting view share it); the preference is remembered across pages.

import { prefs } from "./dom.js";

/** The browser's speech synthesis, or null where it has none (then "Read new lines aloud" is disabled). */
function synthesis() {
  return "speechSynthesis" in window && typeof SpeechSynthesisUtterance === "function" ? window.speechSynthesis : null;
}

/** Read one line aloud (nothing where the browser cannot). */
export function speakLine(text) {
  const voice = synthesis();
  if (!voice) return;
  const utterance = new SpeechSynthesisUtterance(text);
  utterance.lang = document.documentElement.lang || "en";
  voice.speak(utterance);
}

/** Wire the checkbox to ``view.announce`` (a CaptionView or MeetingLog) and remember the choice. */
export function bindReadAloud(checkbox, view) {
  if (!synthesis()) {
    checkbox.disabled = true;
    checkbox.closest("label").title = "This browser cannot read text aloud.";
    return;
  }
  checkbox.checked = prefs.get("announce", "0") === "1";
  view.announce = checkbox.checked;
  checkbox.addEventListener("change", () => {
    view.announce = checkbox.checked;
    prefs.set("announce", checkbox.checked ? "1" : "0");
    if (!checkbox.checked) synthesis().cancel();
  });
}
