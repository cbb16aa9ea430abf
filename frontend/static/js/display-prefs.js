// Text size, high-contrast and written-numbers preferences, remembered across pages and visits.

import { prefs } from "./dom.js";

const SIZES = [80, 90, 100, 115, 130, 150, 175, 200, 250];

export function applyStoredDisplay() {
  document.documentElement.dataset.contrast = prefs.get("contrast", "normal");
  setScale(Number(prefs.get("fontScale", 100)));
}

function setScale(percent) {
  const scale = SIZES.includes(percent) ? percent : 100;
  document.documentElement.style.setProperty("--caption-scale", String(scale / 100));
  prefs.set("fontScale", scale);
  return scale;
}

/** Wire the A−/A+ buttons, the size readout and the contrast checkbox (any may be null). */
export function bindDisplayControls({ smaller, larger, readout, contrast }) {
  let scale = setScale(Number(prefs.get("fontScale", 100)));
  const show = () => {
    if (readout) readout.textContent = `${scale}%`;
    if (smaller) smaller.disabled = scale === SIZES[0];
    if (larger) larger.disabled = scale === SIZES[SIZES.length - 1];
  };
  const step = (direction) => {
    const index = SIZES.indexOf(scale) + direction;
    scale = setScale(SIZES[Math.max(0, Math.min(SIZES.length - 1, index))]);
    show();
  };
  smaller?.addEventListener("click", () => step(-1));
  larger?.addEventListener("click", () => step(1));
  if (contrast) {
    contrast.checked = document.documentElement.dataset.contrast === "high";
    contrast.addEventListener("change", () => {
      const value = contrast.checked ? "high" : "normal";
      document.documentElement.dataset.contrast = value;
      prefs.set("contrast", value);
    });
  }
  show();
}

/**
 * Whether numbers are shown in written form ("600 mg"). One preference per kind of page, remembered across
 * visits: dictation ("writtenNumbers", on unless turned off) and meetings, the captions page and the
 * meeting view ("writtenNumbersMeetings", off unless turned on), matching the exports' defaults.
 */
export function writtenNumbersPreferred(key = "writtenNumbers", fallback = "on") {
  return prefs.get(key, fallback) !== "off";
}

/** Wire a "Written numbers" checkbox: it shows and remembers the preference; returns the current value. */
export function bindWrittenNumbers(checkbox, onChange = () => {}, { key = "writtenNumbers", fallback = "on" } = {}) {
  const on = writtenNumbersPreferred(key, fallback);
  checkbox.checked = on;
  checkbox.addEventListener("change", () => {
    prefs.set(key, checkbox.checked ? "on" : "off");
    onChange(checkbox.checked);
  });
  return on;
}

export const MEETING_WRITTEN = { key: "writtenNumbersMeetings", fallback: "off" };
