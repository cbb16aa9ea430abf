"""Whisper's written form -> the first recognition pass's spoken form, so both passes caption in one style.

The first pass (trained on ``training/text.py`` sentences) writes cased text with only ``[A-Za-z ,.?!'-]``:
numbers as words, no symbols. Whisper writes "600 mg", "$5.2 million", "2026", "3rd", "50%", "10:30", "—".
``to_spoken_form`` rewrites the latter into the former with a fixed sequence of regex passes (pure, no I/O).

Style decisions (evidence in brackets):

- "and" after hundreds, British style: 250 -> "two hundred and fifty", 1050 -> "one thousand and fifty"
  [``eval/generate.py`` DOSES: "two hundred and fifty milligrams"; the fortunes training text also says
  "hundred and"].
- Compound numbers joined by a SPACE, not a hyphen: "twenty two", "twenty first" [``eval/generate.py``
  PERCENTS: "twenty two percent"; ``tests/support/tiny_model.py``: "twenty one and forty two"]. The WER
  normaliser (``eval/metrics.py``) keeps inner hyphens, so "twenty-two" would cost two errors against the
  references. Change ``COMPOUND_JOINER`` (``captions_model.number_words``) to flip it everywhere.
- Decimals digit by digit with "zero": "0.5" -> "zero point five" [DOSES: "zero point five milligrams";
  MONEY: "one point two billion dollars"].
- US spelling and "percent" [PERCENTS; faker ``en_US`` in the training text]: "milliliters", "liters",
  "meters"; a unit is singular only after exactly "1" ("one gram" [DOSES], "zero point five milligrams").
- Years: a 4-digit number 1100-2099 without a thousands comma, not already taken as money, a percentage or a
  quantity with a unit, is read as a year: 1999 "nineteen ninety nine", 2026 "twenty twenty six",
  1905 "nineteen oh five", 1900 "nineteen hundred", 2000 "two thousand", 2005 "two thousand and five".
  "1,500" (with a comma) is a cardinal.
- Times: "10:30" "ten thirty", "10:05" "ten oh five", "9:00" "nine o'clock"; with a.m./p.m. (any of
  "am", "AM", "a.m.") "nine a.m." / "nine thirty p.m.". Other "a:b" is a ratio: "three to one". Without
  its colon after "at", "by", "until", "till", "from", "before", "after" or "around", "1030" / "10.30" /
  "0930" is a time too ("at ten thirty"; hour 0-23, minutes 00-59, no percent, money or unit after it);
  elsewhere it stays a number.
- Titles and abbreviations made of allowed characters stay as written: "Dr. Smith", "Mr.", "Mrs.", "Jr.",
  "a.m.", "U.S." [the training text's faker names are "Dr. Jane Doe", "Mr. John Smith", "Jr."; so the
  first pass writes the dotted forms; the WER normaliser drops the dots either way].
- Negative numbers: "-5" -> "minus five"; ranges "5-10" / "5–10" -> "five to ten"; "3x" -> "three times".
- Punctuation: ";" ":" em/en dashes, spaced hyphens and "--" -> ","; "..." / "…" -> "." at the end or
  before a capital, "," before a lower-case word; quotes and brackets removed; curly apostrophes straightened;
  accents stripped ("café" -> "cafe"); "&" "and", "+" "plus", "@" "at", "=" "equals", "#5" "number five",
  "~5" "about five"; any other character outside the allowed set becomes a space. Spaces are collapsed,
  no space before a mark, no repeated marks, no leading mark.
- Known limits (kept simple on purpose): a 4-digit 1100-2099 count without a unit reads as a year ("2026
  patients" -> "twenty twenty six patients"); "a.m.," keeps only the full stop (the training text never has
  two marks in a row); phone numbers read as ranges; superscripts read as digits ("m²" -> "m two").
- Words put in place of a number or sign at the start of a sentence are capitalised ("5 patients." -> "Five
  patients.", "#1" -> "Number one"); other casing is Whisper's own (a lower-case start, as in a caption that
  continues a sentence, stays lower-case).
"""

from __future__ import annotations

import re
import unicodedata

from captions_model.number_words import (
    COMPOUND_JOINER,
    decimal_words,
    number_to_words,
    ordinal_words,
    year_words,
)
from captions_model.spoken_form_numbers import (
    _ISO_DATE,
    _LATE_PASSES,
    _MONTH_DAY,
    _NUMBER_PASSES,
    _RANGE,
    _X_TIMES,
    _iso_date,
    _month_day,
    _sub,
)

__all__ = [
    "ALLOWED_TEXT",
    "COMPOUND_JOINER",
    "decimal_words",
    "number_to_words",
    "ordinal_words",
    "to_spoken_form",
    "year_words",
]

ALLOWED_TEXT = re.compile(r"^[A-Za-z ,.?!'-]*$")
"""The first pass's style: letters, space and ``, . ? ! ' -`` only (``training/text.py`` ``ALLOWED``)."""


# --- pre-normalisation -------------------------------------------------------------------------------------

_CHAR_MAP = str.maketrans(
    {
        "’": "'",
        "‘": "'",
        "ʼ": "'",
        "`": "'",
        "´": "'",
        "−": "-",
        "‐": "-",
        "‑": "-",
        "\u00a0": " ",
        "\u202f": " ",
        "\u2009": " ",
        "…": "...",
        "µ": "μ",
        "½": " 1/2",
        "¼": " 1/4",
        "¾": " 3/4",
    }
)
# --- symbols and punctuation -------------------------------------------------------------------------------

_SYMBOL_WORDS = (
    (re.compile(r"&"), " and "),
    (re.compile(r"\+"), " plus "),
    (re.compile(r"="), " equals "),
    (re.compile(r"@"), " at "),
    (re.compile(r"°"), " degrees "),
)
_ELLIPSIS = re.compile(r"\s*\.{2,}\s*(?=(?P<next>[^\s\"'”’)\]]?))")
_COMMA_MARKS = re.compile(r"\s*(?:[;:—–]|(?<!\S)-+(?!\S)|--+)\s*")
_DROP = re.compile(r"[\"“”„«»‹›()\[\]{}<>*_|\\^]")
_OTHER = re.compile(r"[^A-Za-z ,.?!'-]")
_APOSTROPHE = re.compile(r"(?<![A-Za-z])'|'(?![A-Za-z\s])")
_LETTER_DASH_DIGIT = re.compile(r"(?<=[A-Za-z])-(?=\d)")
_FEET_INCHES = re.compile(r"(?<![\w.])(?P<ft>\d)'\s?(?P<inch>\d{1,2})(?:\"|'')")
_DIGIT_QUOTE_DIGIT = re.compile(r"(?<=\d)'(?=\d)")
_NUMBER_SIGN = re.compile(r"#(?=\s?\d)")
_ABOUT_SIGN = re.compile(r"~(?=\s?\d)")
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w.]\w)")  # versions, addresses: "1.2.3"
_LOOSE_HYPHEN = re.compile(r"(?<![A-Za-z])-|-(?![A-Za-z])")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_MARK = re.compile(r" (?=[,.?!])")
_MARK_RUN = re.compile(r"[,.?!](?:\s*[,.?!])+")
_COMMA_GLUED = re.compile(r",(?=[A-Za-z])")
_LEADING_MARKS = re.compile(r"^[.?!]+\s*")


def _ellipsis(m: re.Match[str]) -> str:
    nxt = m["next"]
    return ", " if nxt and nxt.islower() else ". "


def _mark_run(m: re.Match[str]) -> str:
    """Keep the strongest mark of a run: ``?`` or ``!`` over ``.`` over ``,``."""
    marks = m.group(0)
    for mark in "?!.":
        if mark in marks:
            return mark
    return ","


def _strip_accents(text: str) -> str:
    """NFKD without combining marks: "café" -> "cafe", "５" -> "5" (the first pass writes ASCII only)."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def to_spoken_form(text: str) -> str:
    """Whisper's written form in the first pass's spoken style; the result always matches ``ALLOWED_TEXT``.

    Numbers, money, percentages, units, times, ordinals and years become words; other symbols become words
    or punctuation or go (see the module docstring for every rule and the evidence behind it)."""
    s = _strip_accents(text.translate(_CHAR_MAP))  # also folds compatibility forms: "５" -> "5", "℃" -> "°C"
    s = _LETTER_DASH_DIGIT.sub(" ", s)  # "COVID-19" -> "COVID 19"
    s = _FEET_INCHES.sub(lambda m: f"{m['ft']} foot {m['inch']}", s)  # 5'10" -> "five foot ten"
    s = _DIGIT_QUOTE_DIGIT.sub(" ", s)
    s = _sub(_NUMBER_SIGN, lambda m: "number")(s)
    s = _sub(_ABOUT_SIGN, lambda m: "about")(s)
    s = _sub(_DOTTED, lambda m: " point ".join(number_to_words(int(p)) for p in m.group(0).split(".")))(s)
    s = _sub(_ISO_DATE, _iso_date)(s)
    s = _sub(_MONTH_DAY, _month_day)(s)
    s = _RANGE.sub(lambda m: f"{m['pct']} to ", s)  # first: "$5-$10" is a range, not minus ten dollars
    for apply in _NUMBER_PASSES:
        s = apply(s)
    s = _X_TIMES.sub(" times", s)
    for apply in _LATE_PASSES:
        s = apply(s)
    for pattern, words in _SYMBOL_WORDS:
        s = pattern.sub(words, s)
    s = _ELLIPSIS.sub(_ellipsis, s)
    s = _COMMA_MARKS.sub(", ", s)
    s = _DROP.sub(" ", s)
    s = _OTHER.sub(" ", s)
    s = _APOSTROPHE.sub("", s)
    s = _LOOSE_HYPHEN.sub(" ", s)
    s = _SPACES.sub(" ", s)
    s = _SPACE_BEFORE_MARK.sub("", s)
    s = _MARK_RUN.sub(_mark_run, s)
    s = _COMMA_GLUED.sub(", ", s)
    s = s.strip(" ,")
    s = _LEADING_MARKS.sub("", s)
    return s
