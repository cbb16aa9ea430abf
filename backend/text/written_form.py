"""Spoken form -> written form for display: "six hundred milligrams" -> "600 mg" (inverse text normalisation).

The recogniser writes numbers as words (``captions_model.spoken_form`` is the opposite direction, used for the
training text). ``to_written`` rewrites only what is clearly a number, and leaves everything else as it was:

- Cardinals, British "and" or not: "two hundred and fifty" -> "250", "one thousand and fifty" -> "1050";
  ten thousand and more get thousands commas ("12,500"). A lone word below ten stays a word ("one of the",
  "no one", "two tablets"), unless a unit follows ("five milligrams" -> "5 mg"), also across a range
  ("five to ten milligrams" -> "5 to 10 mg"). "a hundred" counts as 100
  only when more follows ("a hundred and fifty" -> "150") or a unit does.
- Decimals: "two point five" -> "2.5"; "point five milligrams" -> "0.5 mg" (a leading zero, as prescribing
  rules ask). Ordinals: "twenty third" -> "23rd"; "first" ... "ninth" alone stay words ("first of all").
- Units after a number: mg, mcg, g, kg, mL, L, mmol, mm, cm, mmHg, %, °C, °F, and "per" chains
  ("milligrams per kilogram" -> "mg/kg", "milliliters per hour" -> "mL/hr"); "units" stays a word (a
  written "U" is misread as a zero).
- Dates: "the third of March" -> "3 March", "March third" -> "3 March", with a following year
  ("twenty twenty six" -> "2026"). Lower-case "may" and "march" start a date only in "the third of may".
- Years elsewhere only after "in", "since", "until" or "year": "in nineteen ninety nine" -> "in 1999".
- Times need am/pm: "ten thirty a.m." -> "10:30 am", "nine pm" -> "9 pm"; "ten thirty" alone is left alone.
- Blood pressure: "one forty over ninety" -> "140/90" after "pressure" or "BP", or before mmHg.
- Two number phrases in a row that are none of the above ("nineteen ninety nine", "five five five one")
  are ambiguous and stay words. A word joined by a hyphen to a non-number ("a one-off", "ten-minute") and
  every word of a ``keep`` term (a matched vocabulary term) are never changed.

``frontend/static/js/written-form.js`` is the same converter for the pages; both are checked against
``tests/fixtures/written_form_cases.json``. Pure: no I/O.

Why not NVIDIA's ``nemo-text-processing`` (issue 30 named it): version 1.2.0 (with the ``pynini==2.1.6.post1``
wheel it pins, ~160 MB) was tried on this project's cases on 6 December 2026. It builds its grammars in 6.3 s
and takes 7-82 ms per sentence on this CPU, and on clinical and meeting text it wrote "one forty over ninety"
as "01:40 over 90", "first of all" as "1st of all", "the twenty first of may" as "21 may", "five pm" as
"05:00 p.m." and "ten percent" as "10 %"; it does handle currency ("one point two billion dollars" ->
"$1.2 billion"), which this converter leaves as "1.2 billion dollars". It also cannot run in the browser,
where the dictation page switches forms without a round trip. Adopting it means carrying those errors or
patching its grammars.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from captions_model.spoken_form import number_to_words, ordinal_words

__all__ = ["to_written"]

_CARDINALS = {number_to_words(n): n for n in [*range(20), *range(20, 100, 10)]}
_ORDINALS = {ordinal_words(n): n for n in [*range(1, 20), *range(20, 100, 10)]}
_DIGITS = {number_to_words(n): n for n in range(10)} | {"oh": 0}
_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}
_SCALE_ORDINALS = {"thousandth": 1000, "millionth": 10**6, "billionth": 10**9}
_MONTHS = "january february march april may june july august september october november december".split()
_MERIDIEM = {"am": "am", "pm": "pm", "a.m.": "am", "p.m.": "pm"}
_YEAR_CUES = {"in", "since", "until", "year"}
_PRESSURE_CUES = {"pressure", "bp"}

_UNIT_WORDS = {
    "milligram": "mg",
    "microgram": "mcg",
    "nanogram": "ng",
    "gram": "g",
    "kilogram": "kg",
    "milliliter": "mL",
    "millilitre": "mL",
    "deciliter": "dL",
    "decilitre": "dL",
    "liter": "L",
    "litre": "L",
    "millimole": "mmol",
    "millimeter": "mm",
    "millimetre": "mm",
    "centimeter": "cm",
    "centimetre": "cm",
}
_PER_WORDS = _UNIT_WORDS | {"kilo": "kg", "hour": "hr", "minute": "min", "day": "day", "dose": "dose"}
_PHRASE_UNITS: tuple[tuple[tuple[str, ...], str | None], ...] = (
    # (spoken words, written form); None keeps the words as they were said
    (("millimeters", "of", "mercury"), "mmHg"),
    (("millimetres", "of", "mercury"), "mmHg"),
    (("degrees", "celsius"), "°C"),
    (("degrees", "centigrade"), "°C"),
    (("degrees", "fahrenheit"), "°F"),
    (("per", "cent"), "%"),
    (("percent",), "%"),
    (("international", "units"), None),
    (("units",), None),
    (("unit",), None),
    (("degrees",), None),
)
_TOKEN = re.compile(r"[AaPp]\.\s?[Mm]\.|[A-Za-z]+(?:'[A-Za-z]+)*")
_LINK = re.compile(r"[ \t]+|-")  # what may join the words of one number ("twenty two", "twenty-two")


@dataclass(frozen=True)
class _Num:
    """A number phrase: its value, the token after it, and how it was said."""

    value: int
    end: int
    ordinal: bool = False
    decimals: str | None = None  # the digits said after "point"
    leading_a: bool = False  # "a hundred ..."


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    text: str | None  # None: leave the tokens as they are


def _number_text(value: int) -> str:
    return f"{value:,}" if value >= 10_000 else str(value)


def _ordinal_suffix(value: int) -> str:
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")


class _Text:
    """One caption's tokens (words, "a.m."), which of them may change, and the parsers over them."""

    def __init__(self, text: str, keep: Iterable[str]) -> None:
        self.text = text
        self.spans = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
        self.low = [text[a:b].lower() for a, b in self.spans]
        self.frozen = self._frozen(keep)

    def _frozen(self, keep: Iterable[str]) -> set[int]:
        frozen: set[int] = set()
        for k in range(1, len(self.spans)):
            if self.gap(k) == "-" and not (self._numeric(k - 1) and self._numeric(k)):
                frozen |= {k - 1, k}
        for term in keep:
            term = term.strip()
            if not term:
                continue
            for m in re.finditer(rf"(?<![A-Za-z]){re.escape(term)}(?![A-Za-z])", self.text, re.IGNORECASE):
                frozen |= {k for k, (a, b) in enumerate(self.spans) if a < m.end() and b > m.start()}
        return frozen

    def _numeric(self, k: int) -> bool:
        w = self.low[k]
        return w in _CARDINALS or w in _ORDINALS or w in _SCALES or w == "hundred"

    def gap(self, k: int) -> str:
        """The characters between token ``k - 1`` and token ``k``."""
        return self.text[self.spans[k - 1][1] : self.spans[k][0]]

    def word(self, k: int, first: bool = False) -> str | None:
        """Token ``k`` in lower case when it may take part in a conversion (and, unless ``first``, is joined
        to the token before it by a space or hyphen); None otherwise."""
        if k >= len(self.spans) or k in self.frozen:
            return None
        if not first and (k == 0 or not _LINK.fullmatch(self.gap(k))):
            return None
        return self.low[k]

    # --- numbers -----------------------------------------------------------------------------------------

    def below100(self, k: int, first: bool = False) -> _Num | None:
        w = self.word(k, first)
        if w is None:
            return None
        if w in _ORDINALS:
            return _Num(_ORDINALS[w], k + 1, ordinal=True)
        if w not in _CARDINALS:
            return None
        value = _CARDINALS[w]
        if value >= 20:
            unit = self.word(k + 1)
            if unit in _CARDINALS and 1 <= _CARDINALS[unit] <= 9:
                return _Num(value + _CARDINALS[unit], k + 2)
            if unit in _ORDINALS and _ORDINALS[unit] <= 9:
                return _Num(value + _ORDINALS[unit], k + 2, ordinal=True)
        return _Num(value, k + 1)

    def group(self, k: int, first: bool = False) -> _Num | None:
        """Below a thousand, or "fifteen hundred" style hundreds."""
        leading_a = self.word(k, first) == "a" and self.word(k + 1) in ("hundred", "thousand", "million")
        head = _Num(1, k + 1, leading_a=True) if leading_a else self.below100(k, first)
        if head is None or head.ordinal:
            return head
        w = self.word(head.end)
        if w not in ("hundred", "hundredth") or head.value == 0:
            return head
        value, end = head.value * 100, head.end + 1
        if w == "hundredth":
            return _Num(value, end, ordinal=True, leading_a=leading_a)
        rest = self.below100(end + 1) if self.word(end) == "and" else self.below100(end)
        if rest is not None and rest.value > 0:
            return _Num(value + rest.value, rest.end, rest.ordinal, leading_a=leading_a)
        return _Num(value, end, leading_a=leading_a)

    def cardinal(self, k: int, first: bool = True) -> _Num | None:
        """The longest number phrase at token ``k`` (cardinal or ordinal), with any "point" decimals."""
        head = self.group(k, first)
        if head is None or head.ordinal:
            return head
        total, value, end, last_scale = 0, head.value, head.end, 10**12
        while True:
            w = self.word(end)
            scale = _SCALES.get(w or "") or _SCALE_ORDINALS.get(w or "")
            if scale is None or not 0 < value < 1000 or scale >= last_scale:
                break
            total, value, end, last_scale = total + value * scale, 0, end + 1, scale
            if w in _SCALE_ORDINALS:
                return _Num(total, end, ordinal=True, leading_a=head.leading_a)
            tail = self.below100(end + 1) if self.word(end) == "and" else self.group(end)
            if tail is None or tail.value == 0 or tail.value >= 1000:
                break
            value, end = tail.value, tail.end
            if tail.ordinal:
                return _Num(total + value, end, ordinal=True, leading_a=head.leading_a)
        digits, after = self.decimals(end)
        return _Num(total + value, after, decimals=digits, leading_a=head.leading_a)

    def decimals(self, k: int, first: bool = False) -> tuple[str | None, int]:
        """The digit words after "point" at token ``k``, and the token after them."""
        if self.word(k, first) != "point":
            return None, k
        end = k + 1
        while self.word(end) in _DIGITS:
            end += 1
        if end == k + 1:
            return None, k
        return "".join(str(_DIGITS[self.low[i]]) for i in range(k + 1, end)), end

    def unit(self, k: int) -> tuple[str | None, int] | None:
        """(written unit, token after it) for a unit said at token ``k``; None when there is none."""
        for words, written in _PHRASE_UNITS:
            if all(self.word(k + i) == w for i, w in enumerate(words)):
                if written is None:
                    return self.text[self.spans[k][0] : self.spans[k + len(words) - 1][1]], k + len(words)
                return written, k + len(words)
        w = self.word(k) or ""
        base = _UNIT_WORDS.get(w[:-1] if w.endswith("s") else w)
        if base is None:
            return None
        end = k + 1
        while self.word(end) == "per" and self.word(end + 1) in _PER_WORDS:
            base += "/" + _PER_WORDS[self.low[end + 1]]
            end += 2
        return base, end

    def year(self, k: int, first: bool) -> _Num | None:
        """A year said at token ``k``: "nineteen oh five", "twenty twenty six" (1900-2099), or a cardinal
        1000-2099 ("two thousand and five")."""
        century = self.word(k, first)
        if century in _CARDINALS and 19 <= _CARDINALS[century] <= 20:
            if self.word(k + 1) == "oh" and self.word(k + 2) in _DIGITS and _DIGITS[self.low[k + 2]] > 0:
                return _Num(_CARDINALS[century] * 100 + _DIGITS[self.low[k + 2]], k + 3)
            rest = self.below100(k + 1)
            if rest is not None and not rest.ordinal and rest.value >= 10:
                return _Num(_CARDINALS[century] * 100 + rest.value, rest.end)
        number = self.cardinal(k, first)
        if number and not number.ordinal and number.decimals is None and 1000 <= number.value <= 2099:
            return number
        return None

    def starts_number(self, k: int) -> bool:
        return self.word(k) in _CARDINALS or self.word(k) in _ORDINALS or self.word(k) == "point"


def _join(number: str, unit: str) -> str:
    return number + unit if unit == "%" else f"{number} {unit}"


def _with_year(t: _Text, start: int, k: int, date: str) -> _Match:
    """The date ``date`` (tokens ``start``..``k``), with the year said after it, if one is."""
    if k < len(t.spans) and t.gap(k) in (" ", ", ") and k not in t.frozen:
        year = t.year(k, first=True)
        if year is not None:
            return _Match(start, year.end, f"{date} {year.value}")
    return _Match(start, k, date)


def _date(t: _Text, i: int) -> _Match | None:
    """ "the third of March", "March the third", "March third" -> "3 March" (and a year after it)."""
    k = i + 1 if t.word(i, first=True) == "the" else i
    day = t.cardinal(k, first=k == i)
    if day and day.ordinal and 1 <= day.value <= 31 and t.word(day.end) == "of":
        month = t.word(day.end + 1)
        if month in _MONTHS:
            return _with_year(t, i, day.end + 2, f"{day.value} {month.capitalize()}")
    month = t.word(i, first=True)
    if month in _MONTHS and (month not in ("may", "march") or t.text[t.spans[i][0]].isupper()):
        k = i + 2 if t.word(i + 1) == "the" else i + 1
        day = t.cardinal(k, first=False)
        if day and day.ordinal and 1 <= day.value <= 31:
            return _with_year(t, i, day.end, f"{day.value} {month.capitalize()}")
    return None


def _time(t: _Text, i: int) -> _Match | None:
    """ "ten thirty a.m." -> "10:30 am", "nine oh five pm" -> "9:05 pm", "seven am" -> "7 am"."""
    hour = _CARDINALS.get(t.word(i, first=True) or "", 0)
    if not 1 <= hour <= 12:
        return None
    k, minutes = i + 1, None
    if t.word(k) == "oh" and 1 <= _CARDINALS.get(t.word(k + 1) or "", 0) <= 9:
        minutes, k = _CARDINALS[t.low[k + 1]], k + 2
    else:
        said = t.below100(k)
        if said is not None and not said.ordinal and 10 <= said.value <= 59:
            minutes, k = said.value, said.end
    marker = re.sub(r"\s", "", t.word(k) or "")
    if marker in _MERIDIEM:
        end = k + 1
    elif marker in ("a", "p") and t.word(k + 1) == "m":
        marker, end = marker + "m", k + 2
    else:
        return None
    text = (f"{hour}:{minutes:02d}" if minutes is not None else str(hour)) + " " + _MERIDIEM[marker]
    after = t.text[t.spans[end - 1][1] :]
    if t.low[end - 1].endswith(".") and (not after.strip() or re.match(r"\s+[A-Z]", after)):
        text += "."  # "a.m." ended the sentence too
    return _Match(i, end, text)


def _pressure_value(t: _Text, k: int, first: bool) -> _Num | None:
    """A blood pressure reading: "one forty" (140), "a hundred and ten", "ninety"."""
    hundreds = t.word(k, first)
    if hundreds in ("one", "two"):
        rest = t.below100(k + 1)
        if rest is not None and not rest.ordinal and rest.value >= 10:
            return _Num(_CARDINALS[hundreds] * 100 + rest.value, rest.end)
    number = t.cardinal(k, first)
    if number and not number.ordinal and number.decimals is None and 20 <= number.value <= 300:
        return number
    return None


def _pressure(t: _Text, i: int) -> _Match | None:
    """ "blood pressure one forty over ninety" -> "blood pressure 140/90"."""
    high = _pressure_value(t, i, first=True)
    if high is None or t.word(high.end) != "over":
        return None
    low = _pressure_value(t, high.end + 1, first=False)
    if low is None:
        return None
    unit = t.unit(low.end)
    mmhg = unit is not None and unit[0] == "mmHg"
    before = t.low[max(0, i - 4) : i]
    if not (mmhg or _PRESSURE_CUES & set(before) or "b p" in " ".join(before)):
        return None
    if unit is not None and mmhg:
        return _Match(i, unit[1], f"{high.value}/{low.value} mmHg")
    return _Match(i, low.end, f"{high.value}/{low.value}")


def _year(t: _Text, i: int) -> _Match | None:
    """ "in twenty twenty six" -> "in 2026" (only after "in", "since", "until", "year")."""
    if i == 0 or t.low[i - 1] not in _YEAR_CUES:
        return None
    year = t.year(i, first=True)
    if year is None or t.starts_number(year.end):
        return None
    return _Match(i, year.end, str(year.value))


def _quantity(t: _Text, i: int) -> _Match | None:
    """A number phrase, with the unit after it; ambiguous runs and small lone words are left alone."""
    minus = t.word(i, first=True) == "minus"
    k = i + 1 if minus else i
    number = t.cardinal(k, first=not minus)
    if number is None:
        if minus or t.word(i, first=True) != "point" or (i > 0 and t.low[i - 1] in _CARDINALS):
            return None
        digits, end = t.decimals(i, first=True)  # "point five milligrams" -> "0.5 mg"
        unit = t.unit(end) if digits else None
        return _Match(i, unit[1], _join(f"0.{digits}", unit[0] or "")) if unit else None
    if t.starts_number(number.end):  # "nineteen ninety nine", "five five five": which number is meant?
        end = number.end
        while t.starts_number(end):
            end = end + 2 if t.word(end) == "oh" else (t.cardinal(end, first=False) or number).end
        return _Match(i, end, None)
    sign = "-" if minus else ""
    text = _number_text(number.value) + (f".{number.decimals}" if number.decimals is not None else "")
    unit = None if number.ordinal else t.unit(number.end)
    if unit is not None:
        return _Match(i, unit[1], _join(sign + text, unit[0] or ""))
    words = number.end - k
    if number.ordinal:
        if (words == 1 and number.value < 10) or number.leading_a or minus:
            return _Match(i, number.end, None)
        return _Match(i, number.end, f"{number.value}{_ordinal_suffix(number.value)}")
    if (
        number.decimals is None
        and not minus
        and ((words == 1 and number.value < 10) or (number.leading_a and words <= 2))
        and not _range_with_unit(t, number.end)
    ):
        return _Match(i, number.end, None)
    return _Match(i, number.end, sign + text)


def _range_with_unit(t: _Text, k: int) -> bool:
    """Whether "to"/"or" and a number with a unit follow at token ``k`` ("five to ten milligrams")."""
    if t.word(k) not in ("to", "or"):
        return False
    upper = t.cardinal(k + 1, first=False)
    return upper is not None and not upper.ordinal and t.unit(upper.end) is not None


_MATCHERS = (_date, _time, _pressure, _year, _quantity)


def to_written(text: str, keep: Iterable[str] = ()) -> str:
    """``text`` (a caption in spoken form) with its numbers, dates, times, doses and readings in written
    form; every other character is kept. Words of the ``keep`` terms (e.g. a final's ``matched_terms``)
    are never changed. Idempotent on text that has no number words left."""
    t = _Text(text, keep)
    pieces: list[str] = []
    last = i = 0
    while i < len(t.spans):
        match = next((m for matcher in _MATCHERS if (m := matcher(t, i))), None)
        if match is None:
            i += 1
            continue
        if match.text is not None:
            pieces += [text[last : t.spans[match.start][0]], match.text]
            last = t.spans[match.end - 1][1]
        i = match.end
    pieces.append(text[last:])
    return "".join(pieces)
