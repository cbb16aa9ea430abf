"""Numbers as words, in the first pass's spoken style: cardinals with the British "and", ordinals, years
and written decimals ("1,250", "5.2", "007").

The spoken form (``captions_model.spoken_form`` and its number rules, ``captions_model.spoken_form_numbers``)
and the written form (the opposite direction) read numbers with these; ``captions_model.spoken_form``'s
docstring gives the style decisions and the evidence behind them.
"""

from __future__ import annotations

__all__ = ["COMPOUND_JOINER", "decimal_words", "number_to_words", "ordinal_words", "year_words"]

COMPOUND_JOINER = " "
"""Between tens and units ("twenty two"); the eval references use a space (``captions_model.spoken_form``)."""

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
