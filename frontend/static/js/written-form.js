// Spoken form -> written form for display: "six hundred milligrams" -> "600 mg". The same converter as
// backend/text/written_form.py (read its docstring for every rule); both are checked against
// tests/fixtures/written_form_cases.json, so change them together.

const ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split(" ");
const TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
const ORDINAL_ONES = "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth".split(" ");

const CARDINALS = new Map();
const ORDINALS = new Map();
ONES.forEach((w, n) => CARDINALS.set(w, n));
ORDINAL_ONES.forEach((w, n) => n && ORDINALS.set(w, n));
TENS.forEach((w, i) => {
  if (!w) return;
  CARDINALS.set(w, i * 10);
  ORDINALS.set(w.slice(0, -1) + "ieth", i * 10);
});
const DIGITS = new Map([...ONES.slice(0, 10).map((w, n) => [w, n]), ["oh", 0]]);
const SCALES = new Map([["thousand", 1e3], ["million", 1e6], ["billion", 1e9]]);
const SCALE_ORDINALS = new Map([["thousandth", 1e3], ["millionth", 1e6], ["billionth", 1e9]]);
const MONTHS = "january february march april may june july august september october november december".split(" ");
const MERIDIEM = { am: "am", pm: "pm", "a.m.": "am", "p.m.": "pm" };
const YEAR_CUES = new Set(["in", "since", "until", "year"]);
const PRESSURE_CUES = new Set(["pressure", "bp"]);

const UNIT_WORDS = {
  milligram: "mg",
  microgram: "mcg",
  nanogram: "ng",
  gram: "g",
  kilogram: "kg",
  milliliter: "mL",
  millilitre: "mL",
  deciliter: "dL",
  decilitre: "dL",
  liter: "L",
  litre: "L",
  millimole: "mmol",
  millimeter: "mm",
  millimetre: "mm",
  centimeter: "cm",
  centimetre: "cm",
};
const PER_WORDS = { ...UNIT_WORDS, kilo: "kg", hour: "hr", minute: "min", day: "day", dose: "dose" };
const PHRASE_UNITS = [
  // [spoken words, written form]; null keeps the words as they were said
  [["millimeters", "of", "mercury"], "mmHg"],
  [["millimetres", "of", "mercury"], "mmHg"],
  [["degrees", "celsius"], "°C"],
  [["degrees", "centigrade"], "°C"],
  [["degrees", "fahrenheit"], "°F"],
  [["per", "cent"], "%"],
  [["percent"], "%"],
  [["international", "units"], null],
  [["units"], null],
  [["unit"], null],
  [["degrees"], null],
];
const TOKEN = /[AaPp]\.\s?[Mm]\.|[A-Za-z]+(?:'[A-Za-z]+)*/g;
const LINK = /^(?:[ \t]+|-)$/;

const num = (value, end, extra = {}) => ({ value, end, ordinal: false, decimals: null, leadingA: false, ...extra });
const has = (map, key) => key !== null && map.has(key);

function numberText(value) {
  return value >= 10000 ? value.toLocaleString("en-US") : String(value);
}

function ordinalSuffix(value) {
  if ([11, 12, 13].includes(value % 100)) return "th";
  return { 1: "st", 2: "nd", 3: "rd" }[value % 10] || "th";
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** One caption's tokens, which of them may change, and the parsers over them. */
class Tokens {
  constructor(text, keep) {
    this.text = text;
    this.spans = [...text.matchAll(TOKEN)].map((m) => [m.index, m.index + m[0].length]);
    this.low = this.spans.map(([a, b]) => text.slice(a, b).toLowerCase());
    this.frozen = this.findFrozen(keep);
  }

  findFrozen(keep) {
    const frozen = new Set();
    for (let k = 1; k < this.spans.length; k++) {
      if (this.gap(k) === "-" && !(this.numeric(k - 1) && this.numeric(k))) {
        frozen.add(k - 1);
        frozen.add(k);
      }
    }
    for (const raw of keep) {
      const term = String(raw).trim();
      if (!term) continue;
      const pattern = new RegExp(`(?<![A-Za-z])${escapeRegExp(term)}(?![A-Za-z])`, "gi");
      for (const m of this.text.matchAll(pattern)) {
        const end = m.index + m[0].length;
        this.spans.forEach(([a, b], k) => {
          if (a < end && b > m.index) frozen.add(k);
        });
      }
    }
    return frozen;
  }

  numeric(k) {
    const w = this.low[k];
    return CARDINALS.has(w) || ORDINALS.has(w) || SCALES.has(w) || w === "hundred";
  }

  gap(k) {
    return this.text.slice(this.spans[k - 1][1], this.spans[k][0]);
  }

  word(k, first = false) {
    if (k >= this.spans.length || this.frozen.has(k)) return null;
    if (!first && (k === 0 || !LINK.test(this.gap(k)))) return null;
    return this.low[k];
  }

  below100(k, first = false) {
    const w = this.word(k, first);
    if (w === null) return null;
    if (ORDINALS.has(w)) return num(ORDINALS.get(w), k + 1, { ordinal: true });
    if (!CARDINALS.has(w)) return null;
    const value = CARDINALS.get(w);
    if (value >= 20) {
      const unit = this.word(k + 1);
      if (has(CARDINALS, unit) && CARDINALS.get(unit) >= 1 && CARDINALS.get(unit) <= 9) {
        return num(value + CARDINALS.get(unit), k + 2);
      }
      if (has(ORDINALS, unit) && ORDINALS.get(unit) <= 9) {
        return num(value + ORDINALS.get(unit), k + 2, { ordinal: true });
      }
    }
    return num(value, k + 1);
  }

  group(k, first = false) {
    const leadingA = this.word(k, first) === "a" && ["hundred", "thousand", "million"].includes(this.word(k + 1));
    const head = leadingA ? num(1, k + 1, { leadingA: true }) : this.below100(k, first);
    if (head === null || head.ordinal) return head;
    const w = this.word(head.end);
    if (!["hundred", "hundredth"].includes(w) || head.value === 0) return head;
    const value = head.value * 100;
    const end = head.end + 1;
    if (w === "hundredth") return num(value, end, { ordinal: true, leadingA });
    const rest = this.word(end) === "and" ? this.below100(end + 1) : this.below100(end);
    if (rest !== null && rest.value > 0) return num(value + rest.value, rest.end, { ordinal: rest.ordinal, leadingA });
    return num(value, end, { leadingA });
  }

  cardinal(k, first = true) {
    const head = this.group(k, first);
    if (head === null || head.ordinal) return head;
    let total = 0;
    let value = head.value;
    let end = head.end;
    let lastScale = 1e12;
    const leadingA = head.leadingA;
    for (;;) {
      const w = this.word(end);
      const scale = SCALES.get(w) || SCALE_ORDINALS.get(w);
      if (scale === undefined || !(value > 0 && value < 1000) || scale >= lastScale) break;
      total += value * scale;
      value = 0;
      end += 1;
      lastScale = scale;
      if (SCALE_ORDINALS.has(w)) return num(total, end, { ordinal: true, leadingA });
      const tail = this.word(end) === "and" ? this.below100(end + 1) : this.group(end);
      if (tail === null || tail.value === 0 || tail.value >= 1000) break;
      value = tail.value;
      end = tail.end;
      if (tail.ordinal) return num(total + value, end, { ordinal: true, leadingA });
    }
    const [decimals, after] = this.decimals(end);
    return num(total + value, after, { decimals, leadingA });
  }

  decimals(k, first = false) {
    if (this.word(k, first) !== "point") return [null, k];
    let end = k + 1;
    while (has(DIGITS, this.word(end))) end += 1;
    if (end === k + 1) return [null, k];
    return [this.low.slice(k + 1, end).map((w) => String(DIGITS.get(w))).join(""), end];
  }

  unit(k) {
    for (const [words, written] of PHRASE_UNITS) {
      if (words.every((w, i) => this.word(k + i) === w)) {
        const end = k + words.length;
        if (written === null) return [this.text.slice(this.spans[k][0], this.spans[end - 1][1]), end];
        return [written, end];
      }
    }
    const w = this.word(k) || "";
    let base = UNIT_WORDS[w.endsWith("s") ? w.slice(0, -1) : w];
    if (base === undefined || !Object.hasOwn(UNIT_WORDS, w.endsWith("s") ? w.slice(0, -1) : w)) return null;
    let end = k + 1;
    while (this.word(end) === "per" && Object.hasOwn(PER_WORDS, this.word(end + 1) || "")) {
      base += "/" + PER_WORDS[this.low[end + 1]];
      end += 2;
    }
    return [base, end];
  }

  year(k, first) {
    const century = this.word(k, first);
    if (has(CARDINALS, century) && CARDINALS.get(century) >= 19 && CARDINALS.get(century) <= 20) {
      const hundreds = CARDINALS.get(century) * 100;
      if (this.word(k + 1) === "oh" && has(DIGITS, this.word(k + 2)) && DIGITS.get(this.low[k + 2]) > 0) {
        return num(hundreds + DIGITS.get(this.low[k + 2]), k + 3);
      }
      const rest = this.below100(k + 1);
      if (rest !== null && !rest.ordinal && rest.value >= 10) return num(hundreds + rest.value, rest.end);
    }
    const number = this.cardinal(k, first);
    if (number && !number.ordinal && number.decimals === null && number.value >= 1000 && number.value <= 2099) {
      return number;
    }
    return null;
  }

  startsNumber(k) {
    const w = this.word(k);
    return has(CARDINALS, w) || has(ORDINALS, w) || (w === "oh" && has(DIGITS, this.word(k + 1)));
  }
}

const match = (start, end, text) => ({ start, end, text });
const join = (number, unit) => (unit === "%" ? number + unit : `${number} ${unit}`);

function withYear(t, start, k, date) {
  if (k < t.spans.length && [" ", ", "].includes(t.gap(k)) && !t.frozen.has(k)) {
    const year = t.year(k, true);
    if (year !== null) return match(start, year.end, `${date} ${year.value}`);
  }
  return match(start, k, date);
}

const capital = (w) => w[0].toUpperCase() + w.slice(1);

function dateAt(t, i) {
  let k = t.word(i, true) === "the" ? i + 1 : i;
  let day = t.cardinal(k, k === i);
  if (day && day.ordinal && day.value >= 1 && day.value <= 31 && t.word(day.end) === "of") {
    const month = t.word(day.end + 1);
    if (MONTHS.includes(month)) return withYear(t, i, day.end + 2, `${day.value} ${capital(month)}`);
  }
  const month = t.word(i, true);
  const upper = /[A-Z]/.test(t.text[t.spans[i][0]]);
  if (MONTHS.includes(month) && (!["may", "march"].includes(month) || upper)) {
    k = t.word(i + 1) === "the" ? i + 2 : i + 1;
    day = t.cardinal(k, false);
    if (day && day.ordinal && day.value >= 1 && day.value <= 31) {
      return withYear(t, i, day.end, `${day.value} ${capital(month)}`);
    }
  }
  return null;
}

function timeAt(t, i) {
  const hour = CARDINALS.get(t.word(i, true)) || 0;
  if (hour < 1 || hour > 12) return null;
  let k = i + 1;
  let minutes = null;
  const single = CARDINALS.get(t.word(k + 1)) || 0;
  if (t.word(k) === "oh" && single >= 1 && single <= 9) {
    minutes = single;
    k += 2;
  } else {
    const said = t.below100(k);
    if (said !== null && !said.ordinal && said.value >= 10 && said.value <= 59) {
      minutes = said.value;
      k = said.end;
    }
  }
  let marker = (t.word(k) || "").replace(/\s/g, "");
  let end;
  if (Object.hasOwn(MERIDIEM, marker)) end = k + 1;
  else if (["a", "p"].includes(marker) && t.word(k + 1) === "m") {
    marker += "m";
    end = k + 2;
  } else return null;
  let text = (minutes !== null ? `${hour}:${String(minutes).padStart(2, "0")}` : String(hour)) + " " + MERIDIEM[marker];
  const after = t.text.slice(t.spans[end - 1][1]);
  if (t.low[end - 1].endsWith(".") && (!after.trim() || /^\s+[A-Z]/.test(after))) text += ".";
  return match(i, end, text);
}

function pressureValue(t, k, first) {
  const hundreds = t.word(k, first);
  if (hundreds === "one" || hundreds === "two") {
    const rest = t.below100(k + 1);
    if (rest !== null && !rest.ordinal && rest.value >= 10) return num(CARDINALS.get(hundreds) * 100 + rest.value, rest.end);
  }
  const number = t.cardinal(k, first);
  if (number && !number.ordinal && number.decimals === null && number.value >= 20 && number.value <= 300) return number;
  return null;
}

function pressureAt(t, i) {
  const high = pressureValue(t, i, true);
  if (high === null || t.word(high.end) !== "over") return null;
  const low = pressureValue(t, high.end + 1, false);
  if (low === null) return null;
  const unit = t.unit(low.end);
  const mmhg = unit !== null && unit[0] === "mmHg";
  const before = t.low.slice(Math.max(0, i - 4), i);
  if (!(mmhg || before.some((w) => PRESSURE_CUES.has(w)) || before.join(" ").includes("b p"))) return null;
  if (mmhg) return match(i, unit[1], `${high.value}/${low.value} mmHg`);
  return match(i, low.end, `${high.value}/${low.value}`);
}

function yearAt(t, i) {
  if (i === 0 || !YEAR_CUES.has(t.low[i - 1])) return null;
  const year = t.year(i, true);
  if (year === null || t.startsNumber(year.end)) return null;
  return match(i, year.end, String(year.value));
}

function quantityAt(t, i) {
  const minus = t.word(i, true) === "minus";
  const k = minus ? i + 1 : i;
  const number = t.cardinal(k, !minus);
  if (number === null) {
    if (minus || t.word(i, true) !== "point" || (i > 0 && CARDINALS.has(t.low[i - 1]))) return null;
    const [digits, end] = t.decimals(i, true);
    const unit = digits ? t.unit(end) : null;
    return unit ? match(i, unit[1], join(`0.${digits}`, unit[0] || "")) : null;
  }
  if (t.startsNumber(number.end)) {
    let end = number.end;
    while (t.startsNumber(end)) end = t.word(end) === "oh" ? end + 2 : (t.cardinal(end, false) || number).end;
    return match(i, end, null);
  }
  const sign = minus ? "-" : "";
  const text = numberText(number.value) + (number.decimals !== null ? `.${number.decimals}` : "");
  const unit = number.ordinal ? null : t.unit(number.end);
  if (unit !== null) return match(i, unit[1], join(sign + text, unit[0] || ""));
  const words = number.end - k;
  if (number.ordinal) {
    if ((words === 1 && number.value < 10) || number.leadingA || minus) return match(i, number.end, null);
    return match(i, number.end, `${number.value}${ordinalSuffix(number.value)}`);
  }
  const small = (words === 1 && number.value < 10) || (number.leadingA && words <= 2);
  if (number.decimals === null && !minus && small && !rangeWithUnit(t, number.end)) return match(i, number.end, null);
  return match(i, number.end, sign + text);
}

/** Whether "to"/"or" and a number with a unit follow at token `k` ("five to ten milligrams"). */
function rangeWithUnit(t, k) {
  if (!["to", "or"].includes(t.word(k))) return false;
  const upper = t.cardinal(k + 1, false);
  return upper !== null && !upper.ordinal && t.unit(upper.end) !== null;
}

const MATCHERS = [dateAt, timeAt, pressureAt, yearAt, quantityAt];

/**
 * `text` (a caption in spoken form) with its numbers, dates, times, doses and readings in written form;
 * every other character is kept. Words of the `keep` terms (a final's matched_terms) are never changed.
 */
export function toWritten(text, keep = []) {
  const source = String(text ?? "");
  const t = new Tokens(source, keep || []);
  const pieces = [];
  let last = 0;
  let i = 0;
  while (i < t.spans.length) {
    let found = null;
    for (const matcher of MATCHERS) {
      found = matcher(t, i);
      if (found) break;
    }
    if (!found) {
      i += 1;
      continue;
    }
    if (found.text !== null) {
      pieces.push(source.slice(last, t.spans[found.start][0]), found.text);
      last = t.spans[found.end - 1][1];
    }
    i = found.end;
  }
  pieces.push(source.slice(last));
  return pieces.join("");
}
