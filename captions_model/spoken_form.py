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
  references. Change ``COMPOUND_JOINER`` to flip it everywhere.
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
from collections.abc import Callable

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

COMPOUND_JOINER = " "
"""Between tens and units ("twenty two"); the eval references use a space (see the module docstring)."""

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion")
_DIGIT = "zero one two three four five six seven eight nine".split()
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_MAX_CARDINAL = 10 ** (3 * len(_SCALES))


def _below_hundred(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (COMPOUND_JOINER + _ONES[ones] if ones else "")


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _below_hundred(rest)
    head = f"{_ONES[hundreds]} hundred"
    return f"{head} and {_below_hundred(rest)}" if rest else head


def _digits(text: str) -> str:
    return " ".join(_DIGIT[int(d)] for d in text)


def number_to_words(n: int) -> str:
    """Cardinal words, British "and": 1250 -> "one thousand two hundred and fifty", 1050 -> "one thousand
    and fifty". Negative numbers get "minus"; beyond the quadrillions the digits are read one by one."""
    if n < 0:
        return "minus " + number_to_words(-n)
    if n >= _MAX_CARDINAL:
        return _digits(str(n))
    if n < 1000:
        return _below_thousand(n)
    groups: list[int] = []
    while n:
        n, group = divmod(n, 1000)
        groups.append(group)
    parts = [f"{_below_thousand(g)} {_SCALES[i]}" for i, g in reversed(list(enumerate(groups))) if g and i]
    last = groups[0]
    if last:
        parts.append(("and " if last < 100 else "") + _below_thousand(last))
    return " ".join(parts)


def _ordinal_of_words(words: str) -> str:
    head, _, last = words.rpartition(" ")
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head} {last}" if head else last


def ordinal_words(n: int) -> str:
    """Ordinal words: 3 -> "third", 21 -> "twenty first", 100 -> "one hundredth"."""
    return _ordinal_of_words(number_to_words(n))


def _plural_of_words(words: str) -> str:
    """ "nineteen ninety" -> "nineteen nineties", "six" -> "sixes" (decades: "1990s", "the 60s")."""
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + ("es" if words.endswith(("x", "s")) else "s")


def year_words(n: int) -> str:
    """A year 1100-2099 as said: "nineteen ninety nine", "nineteen oh five", "nineteen hundred",
    "two thousand and five", "twenty twenty six"; other values fall back to the cardinal."""
    if not 1100 <= n <= 2099 or 2000 <= n <= 2009:
        return number_to_words(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{_below_hundred(high)} hundred"
    if low < 10:
        return f"{_below_hundred(high)} oh {_ONES[low]}"
    return f"{_below_hundred(high)} {_below_hundred(low)}"


def _parse_int(text: str) -> int:
    return int(text.replace(",", "")) if text else 0


def decimal_words(text: str) -> str:
    """A written number ("1,250", "5.2", ".5", "007") as words; a leading zero reads digit by digit."""
    whole, _, frac = text.partition(".")
    digits = whole.replace(",", "")
    if len(digits) > 1 and digits.startswith("0"):
        head = _digits(digits)
    elif digits:
        head = number_to_words(int(digits))
    else:
        head = ""
    if not frac:
        return head
    return f"{head} point {_digits(frac)}".strip()


# A written number: thousands groups, plain digits, optional decimals, or ".5".
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_NUM_START = r"(?<![\w.])"  # not inside a word or after a decimal point
_NUM_END = r"(?!\d)"


def _sentence_start(text: str, pos: int) -> bool:
    """Whether ``pos`` begins a sentence (only quotes, brackets and spaces since the last ``.?!``)."""
    i = pos - 1
    while i >= 0 and text[i] in " \t\n\"'“”‘’([{«¿¡":
        i -= 1
    return i < 0 or (text[i] in ".?!" and i < pos - 1)  # "1.2" is not a sentence break


def _emit(m: re.Match[str], words: str) -> str:
    """``words`` for match ``m``: capitalised at a sentence start, spaced from letters or digits it touches
    ("MP3" -> "MP three")."""
    text = m.string
    if _sentence_start(text, m.start()):
        words = words[:1].upper() + words[1:]
    if m.start() > 0 and text[m.start() - 1].isalnum():
        words = " " + words
    if m.end() < len(text) and text[m.end()].isalnum():
        words += " "
    return words


def _sub(pattern: re.Pattern[str], make: Callable[[re.Match[str]], str | None]) -> Callable[[str], str]:
    """A pass: replace each match by ``_emit(make(m))``; ``make`` returns None to leave a match alone."""

    def apply(text: str) -> str:
        def repl(m: re.Match[str]) -> str:
            words = make(m)
            return m.group(0) if words is None else _emit(m, words)

        return pattern.sub(repl, text)

    return apply


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

# --- money -------------------------------------------------------------------------------------------------

_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
}
_SCALE_WORDS = {
    "thousand": "thousand",
    "million": "million",
    "billion": "billion",
    "trillion": "trillion",
    "k": "thousand",
    "K": "thousand",
    "m": "million",
    "M": "million",
    "mn": "million",
    "b": "billion",
    "B": "billion",
    "bn": "billion",
    "T": "trillion",
    "tn": "trillion",
}
_MONEY = re.compile(
    rf"(?P<neg>(?<![\w.])-)?(?P<cur>[$€£¥])\s?(?P<num>{_NUM}){_NUM_END}"
    r"(?:(?P<sp>\s?)(?P<scale>thousand|million|billion|trillion|mn|bn|tn|[kKmMbBT])(?![A-Za-z]))?"
)


def _money(m: re.Match[str]) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[m["cur"]]
    num, scale = m["num"], m["scale"]
    if scale and len(scale) <= 2 and m["sp"]:  # "$5 M" is not "five million": keep it to the letter pass
        scale = None
    minus = "minus " if m["neg"] else ""
    if scale:
        return f"{minus}{decimal_words(num)} {_SCALE_WORDS[scale]} {many}"
    whole, _, frac = num.partition(".")
    if len(frac) == 2 and sub_one:
        units, cents = _parse_int(whole), int(frac)
        parts = []
        if units:
            parts.append(f"{number_to_words(units)} {one if units == 1 else many}")
        if cents or not units:
            parts.append(f"{number_to_words(cents)} {sub_one if cents == 1 else sub_many}")
        return minus + " and ".join(parts)
    words = decimal_words(num)
    return f"{minus}{words} {one if num == '1' else many}"


_MONEY_RANGE = re.compile(
    rf"(?P<cur>[$€£¥])\s?(?P<num>{_NUM}) to (?P<cur2>[$€£¥])?\s?(?P<num2>{_NUM}){_NUM_END}"
    r"(?:(?P<sp>\s?)(?P<scale>thousand|million|billion|trillion|mn|bn|tn|[kKmMbBT])(?![A-Za-z]))?"
)


def _money_range(m: re.Match[str]) -> str | None:
    """ "$5-10 million" -> "five to ten million dollars", "$5-$10" -> "five to ten dollars"; None (each
    amount on its own) for cents, mixed currencies or a bare second number ("$5 to 10 people")."""
    scale = m["scale"] if m["scale"] and not (len(m["scale"]) <= 2 and m["sp"]) else None
    cur2 = m["cur2"]
    if (cur2 and cur2 != m["cur"]) or not (cur2 or scale):
        return None
    if not scale and any(len(n.partition(".")[2]) == 2 for n in (m["num"], m["num2"])):
        return None
    many = _CURRENCIES[m["cur"]][1]
    words = f"{decimal_words(m['num'])} to {decimal_words(m['num2'])}"
    return f"{words} {_SCALE_WORDS[scale]} {many}" if scale else f"{words} {many}"


# --- dates -------------------------------------------------------------------------------------------------

_MONTHS = "January February March April May June July August September October November December".split()
_ISO_DATE = re.compile(r"(?<![\w.-])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?![\w-])")
_MONTH_DAY = re.compile(rf"\b(?P<month>{'|'.join(_MONTHS)})\s(?P<d>\d{{1,2}})(?![\d:.,]\d|\w)")


def _iso_date(m: re.Match[str]) -> str | None:
    """ "2026-12-06" -> "December sixth, twenty twenty six" (how the date is said)."""
    month, day = int(m["m"]), int(m["d"])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{_MONTHS[month - 1]} {ordinal_words(day)}, {year_words(int(m['y']))}"


def _month_day(m: re.Match[str]) -> str | None:
    """ "December 6, 2026" -> "December sixth, ..." (the year follows as a plain number)."""
    day = int(m["d"])
    return f"{m['month']} {ordinal_words(day)}" if 1 <= day <= 31 else None


# --- times, ratios, ranges ---------------------------------------------------------------------------------

_MERIDIEM = r"(?P<ap>[AaPp])\.?\s?[Mm](?![A-Za-z])\.?"
_CLOCK = re.compile(rf"(?<![\w:.,])(?P<h>\d{{1,2}})(?::(?P<m>\d{{2}}))?(?![\d:])(?:\s?{_MERIDIEM})?")


def _clock(m: re.Match[str]) -> str | None:
    hour, minute, ap = int(m["h"]), m["m"], m["ap"]
    if minute is None and ap is None:
        return None
    if hour > 24 or (minute is not None and int(minute) > 59) or (ap and not 0 < hour <= 12):
        return None
    words = number_to_words(hour)
    mins = int(minute) if minute is not None else 0
    if mins:
        words += " " + (f"oh {_ONES[mins]}" if mins < 10 else _below_hundred(mins))
    if ap:
        marker = "a.m." if ap in "Aa" else "p.m."
        return f"{words} {marker}"
    return words if mins else f"{words} o'clock"


# "at 1030", "by 9.45", "until 0930 hours": a time written without its colon after a word that introduces
# a time (Whisper writes what it heard as "ten thirty" so). The hour 0-23, the minutes 00-59, no decimal,
# percent or unit after it; rewritten as "10:30" for ``_CLOCK``. Elsewhere "1030" stays a number.
_TIME_WORD = r"(?:at|by|until|till|from|before|after|around)"
_BARE_TIME = re.compile(
    rf"(?<![\w])(?P<prep>{_TIME_WORD})\s+(?P<h>[01]?\d|2[0-3])\.?(?P<m>[0-5]\d)(?![\d%]|[.,]\d)"
    rf"(?!\s?(?:%|percent|per\b|[$€£¥]|(?:dollars?|euros?|pounds?|cents?|points?|{{units}})\b))",
    re.IGNORECASE,
)


def _bare_time(m: re.Match[str]) -> str:
    return f"{m['prep']} {int(m['h'])}:{m['m']}"


_RATIO = re.compile(rf"{_NUM_START}(?P<a>\d+):(?P<b>\d+)(?![\d:])")
_RANGE = re.compile(rf"(?<=\d)(?P<pct>%?)\s?[-–—]\s?(?=[$€£¥]?(?:{_NUM}))")
_X_TIMES = re.compile(r"(?<=\d)x\b")

# --- percent, units, ordinals, decades, years, plain numbers -----------------------------------------------

_PERCENT = re.compile(rf"{_NUM_START}(?P<neg>-)?(?P<num>{_NUM}){_NUM_END}\s?%")

_UNITS: dict[str, tuple[str, str]] = {
    "mg": ("milligram", "milligrams"),
    "mcg": ("microgram", "micrograms"),
    "μg": ("microgram", "micrograms"),
    "g": ("gram", "grams"),
    "kg": ("kilogram", "kilograms"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "dl": ("deciliter", "deciliters"),
    "dL": ("deciliter", "deciliters"),
    "l": ("liter", "liters"),
    "L": ("liter", "liters"),
    "mm": ("millimeter", "millimeters"),
    "cm": ("centimeter", "centimeters"),
    "m": ("meter", "meters"),
    "km": ("kilometer", "kilometers"),
    "mmHg": ("millimeter of mercury", "millimeters of mercury"),
    "mmol": ("millimole", "millimoles"),
    "mEq": ("milliequivalent", "milliequivalents"),
    "IU": ("international unit", "international units"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ft": ("foot", "feet"),
    "mi": ("mile", "miles"),
    "mph": ("mile per hour", "miles per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "W": ("watt", "watts"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "V": ("volt", "volts"),
}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_BARE_TIME = re.compile(_BARE_TIME.pattern.replace("{units}", _UNIT_ALT), re.IGNORECASE)
_QUANTITY = re.compile(
    rf"{_NUM_START}(?P<neg>-)?(?P<num>{_NUM}){_NUM_END}\s?(?P<unit>{_UNIT_ALT})"
    rf"(?:/(?P<per>{_UNIT_ALT}))?(?![A-Za-z0-9])"
)


def _quantity(m: re.Match[str]) -> str:
    num, unit, per = m["num"], m["unit"], m["per"]
    before = m.string[max(0, m.start() - 4) : m.start()]
    one, many = _UNITS[unit]
    name = one if num == "1" and not before.endswith("to ") else many
    words = ("minus " if m["neg"] else "") + f"{decimal_words(num)} {name}"
    return words + (f" per {_UNITS[per][0]}" if per else "")


_ORDINAL = re.compile(r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?P<suf>st|nd|rd|th)(?![A-Za-z0-9])", re.I)
_DECADE = re.compile(r"(?<![\w.,])'?(?P<num>\d+0)'?s(?![A-Za-z0-9])")


def _decade(m: re.Match[str]) -> str:
    n = int(m["num"])
    return _plural_of_words(year_words(n) if 1100 <= n <= 2099 else number_to_words(n))


_FRACTION = re.compile(rf"{_NUM_START}(?P<a>\d+)/(?P<b>\d+)(?![\d/])")
_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _fraction(m: re.Match[str]) -> str | None:
    a, b = int(m["a"]), int(m["b"])
    if not 2 <= b <= 10 or a >= b:  # "24/7" is not a fraction
        return None
    one, many = _FRACTION_NAMES.get(b, (ordinal_words(b), ordinal_words(b) + "s"))
    return f"{number_to_words(a)} {one if a == 1 else many}"


_NEGATIVE = re.compile(rf"(?<![\w.,])-(?P<num>{_NUM}){_NUM_END}")
_NUMBER = re.compile(rf"(?<![\d.])(?P<num>{_NUM}){_NUM_END}")
_LEFTOVER_DIGITS = re.compile(r"\d+")


def _number(m: re.Match[str]) -> str:
    num = m["num"]
    if re.fullmatch(r"1[1-9]\d\d|20\d\d", num):
        return year_words(int(num))
    return decimal_words(num)


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


_NUMBER_PASSES = (
    _sub(_MONEY_RANGE, _money_range),
    _sub(_MONEY, _money),
    lambda text: _BARE_TIME.sub(_bare_time, text),
    _sub(_CLOCK, _clock),
    _sub(_RATIO, lambda m: f"{m['a']} to {m['b']}"),
)
_LATE_PASSES = (
    _sub(_PERCENT, lambda m: ("minus " if m["neg"] else "") + f"{decimal_words(m['num'])} percent"),
    _sub(_QUANTITY, _quantity),
    _sub(_ORDINAL, lambda m: ordinal_words(_parse_int(m["num"]))),
    _sub(_DECADE, _decade),
    _sub(_FRACTION, _fraction),
    _sub(_NEGATIVE, lambda m: "minus " + decimal_words(m["num"])),
    _sub(_NUMBER, _number),
    _sub(_LEFTOVER_DIGITS, lambda m: _digits(m.group(0))),  # "1.2.3", "1,2500": digit by digit
)


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
