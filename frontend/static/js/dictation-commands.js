// Spoken dictation commands: carried out, never written. The same list and rules as
// backend/text/dictation_commands.py (both are tested against tests/fixtures/dictation_commands_cases.json).

/** What can be said, what it does, and how the page lists it. */
export const COMMANDS = [
  { say: ["new paragraph", "next paragraph"], insert: "\n\n", capitalize: true, help: "starts a new paragraph" },
  { say: ["new line", "next line"], insert: "\n", capitalize: true, help: "starts a new line" },
  { say: ["full stop", "period"], insert: ".", capitalize: true, help: "." },
  { say: ["comma"], insert: ",", help: "," },
  { say: ["question mark"], insert: "?", capitalize: true, help: "?" },
  { say: ["exclamation mark", "exclamation point"], insert: "!", capitalize: true, help: "!" },
  { say: ["scratch that", "delete that"], scratch: true, help: "removes what you said last" },
];

const BY_PHRASE = new Map(COMMANDS.flatMap((c) => c.say.map((s) => [s, c])));
const PHRASES = [...BY_PHRASE.keys()].sort((a, b) => b.length - a.length).map((p) => p.replace(/ /g, "\\s+"));
// A command is a whole phrase; the recognizer's punctuation and spaces around it are dropped with it.
const PATTERN = new RegExp(`\\s*(?<![\\p{L}\\p{N}'’-])(${PHRASES.join("|")})(?![\\p{L}\\p{N}'’-])[\\s,;:.!?]*`, "giu");
const TRAILING_MARKS = /[\s,;:.!?]*$/u;

/** "plan" -> "Plan"; "10% better" stays as it is (only a leading letter is capitalised). */
function capitalizeFirst(text) {
  return text.replace(/^\p{L}/u, (ch) => ch.toUpperCase());
}

/**
 * Split one dictated utterance into its words and commands: [{text} | {command}] in order.
 */
export function parseUtterance(text) {
  const out = [];
  let last = 0;
  const source = String(text ?? "");
  for (const match of source.matchAll(PATTERN)) {
    if (match.index > last) out.push({ text: source.slice(last, match.index) });
    out.push({ command: BY_PHRASE.get(match[1].toLowerCase().replace(/\s+/g, " ")) });
    last = match.index + match[0].length;
  }
  if (last < source.length) out.push({ text: source.slice(last) });
  return out;
}

/**
 * The note after one dictated utterance: words follow after a space, commands are carried out (punctuation
 * joins the previous word and capitalises the next, "new paragraph"/"new line" break, "scratch that"
 * removes what this utterance said so far, or else the previous utterance). `history` is the note as it was
 * before each earlier utterance (the latest last); the result carries the history to pass next time.
 * `newParagraph`: a long pause came before this utterance.
 */
export function dictate(note, text, { newParagraph = false, history = [] } = {}) {
  const before = String(note ?? "");
  let result = before;
  let stack = [...history];
  let capitalize = false;
  let said = false;
  if (newParagraph && result.trim()) result = result.replace(/\s*$/u, "") + "\n\n";
  const start = result;
  capitalize = result.endsWith("\n"); // after a break, said now or in an earlier utterance
  for (const part of parseUtterance(text)) {
    if (part.text !== undefined) {
      let words = part.text.trim();
      if (!words) continue;
      if (capitalize) words = capitalizeFirst(words);
      result += (!result || /\s$/u.test(result) ? "" : " ") + words;
      capitalize = false;
      said = true;
      continue;
    }
    const command = part.command;
    if (command.scratch) {
      if (said) {
        result = start; // what this utterance said before "scratch that"
        said = false;
      } else if (stack.length) {
        result = stack.pop();
      }
      capitalize = false;
      continue;
    }
    if (command.insert.trim()) {
      if (!result.trim()) continue; // nothing to punctuate
      result = result.replace(TRAILING_MARKS, "") + command.insert;
    } else if (result.trim()) {
      result = result.replace(/[\s,;:]*$/u, "") + command.insert; // a full stop stays, a comma goes
    }
    capitalize = Boolean(command.capitalize);
    said = true;
  }
  if (said && result !== before) stack = [...stack, before].slice(-50);
  return { note: result, history: stack };
}
