"""Which vocabulary terms occur in a final caption (for highlighting and hit statistics)."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from biasing.terms import Term

_WORD = re.compile(r"\w+")


def _canonical(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


@functools.lru_cache(maxsize=32)
def _index(terms: tuple[Term, ...]) -> dict[str, list[tuple[str, str]]]:
    """First word of each spelling -> [(canonical spelling, term text)], longest first; key "" for
    spellings that do not start with a word character."""
    index: dict[str, list[tuple[str, str]]] = {}
    for term in terms:
        for spelling in (term.text, *term.alternates):
            canonical = _canonical(spelling)
            if not canonical:
                continue
            first = _WORD.match(canonical)
            index.setdefault(first.group(0) if first else "", []).append((canonical, term.text))
    for candidates in index.values():
        candidates.sort(key=lambda item: -len(item[0]))
    return index


def _ends_on_boundary(text: str, end: int) -> bool:
    return end >= len(text) or not (_WORD.match(text[end - 1]) and _WORD.match(text[end]))


def find_matches(text: str, terms: Sequence[Term | str]) -> list[str]:
    """Texts of the terms occurring (by their text or an alternate spelling) in ``text``: case-insensitive,
    on word boundaries, each term once, in order of first occurrence."""
    items = tuple(Term(t) if isinstance(t, str) else t for t in terms)
    index = _index(items)
    caption = _canonical(text)
    found: dict[str, None] = {}
    word_starts = {match.start(): match.group(0) for match in _WORD.finditer(caption)}
    loose = index.get("", [])
    positions = range(len(caption)) if loose else sorted(word_starts)
    for position in positions:
        candidates = index.get(word_starts[position], []) if position in word_starts else []
        for spelling, term_text in (*candidates, *loose):
            end = position + len(spelling)
            if caption.startswith(spelling, position) and _ends_on_boundary(caption, end):
                found.setdefault(term_text)
    return list(found)
