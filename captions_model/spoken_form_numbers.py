"""The spoken form's number rules: regex passes that write money, dates, times, ratios, ranges,
percentages, quantities with units, ordinals, decades, fractions and plain numbers as words.

Each rule is a compiled pattern and a function of its match; ``_sub`` makes a pass of the two (a pass's words
are capitalised at a sentence start and spaced from letters or digits they touch). ``_NUMBER_PASSES`` and
``_LATE_PASSES`` are the passes in the order ``captions_model.spoken_form.to_spoken_form`` applies them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from captions_model.number_words import (
    _ONES,
    _below_hundred,
    _digits,
    _parse_int,
    _plural_of_words,
    decimal_words,
    number_to_words,
    ordinal_words,
    year_words,
)

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
