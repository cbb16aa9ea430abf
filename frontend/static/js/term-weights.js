// Term weights as boost levels a person can choose between (issue 35). The API accepts any weight from 0.5 to
// 2 (biasing.terms.TermLimits); the pages offer the four named levels.

export const LEVELS = [
  { value: 0.5, name: "Low", help: "only where the term is heard clearly" },
  { value: 1, name: "Normal", help: "the default" },
  { value: 1.5, name: "High", help: "found more often; a similar-sounding word may now and then be shown as the term" },
  { value: 2, name: "Highest", help: "for names the model keeps missing; checked against the audio all the same" },
];

/** "High (1.5)" for a level, the plain number for any other weight, "Normal (1)" when none is set. */
export function weightLabel(weight) {
  const value = weight ?? 1;
  const level = LEVELS.find((item) => item.value === value);
  return level ? `${level.name} (${value})` : String(value);
}

/** One line for a hint: what the levels mean. */
export function weightHelp() {
  return LEVELS.map((level) => `${level.name}: ${level.help}`).join(". ") + ".";
}

/** A <select> of the levels, `weight` selected (a weight between levels gets an option of its own). */
export function weightSelect(h, attributes, weight) {
  const current = weight ?? 1;
  const options = LEVELS.map((level) => h("option", { value: String(level.value) }, `${level.name} (${level.value})`));
  if (!LEVELS.some((level) => level.value === current)) {
    options.push(h("option", { value: String(current) }, String(current)));
  }
  const select = h("select", attributes, ...options);
  select.value = String(current);
  return select;
}
