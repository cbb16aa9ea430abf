"""Which vocabulary spellings occur in a caption, and where: the one term matcher of the project (the
service's display-form rewrite and highlights and the engine's per-final terms both use it).

Rules: case-insensitive; whole words (a spelling that starts or ends with a word character must not touch
another word character there); any run of whitespace in a spelling matches any run in the caption; at each
position the longest spelling wins and matches do not overlap (leftmost-longest, as a reader highlights).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from biasing.terms import Term

__all__ = ["Match", "TermFinder", "TermMatcher", "canonical", "find_matches"]

_WORD_CHAR = re.compile(r"\w")


def canonical(text: str) -> str:
    """The form two spellings are compared in: NFC, case-folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


@dataclass(frozen=True)
class Match:
    """One occurrence: ``text[start:end]`` is the caption's own text of the spelling ``key`` (canonical)."""

    start: int
    end: int
    key: str


def _pattern(spelling: str) -> str:
    body = r"\s+".join(re.escape(word) for word in spelling.split(" "))
    before = r"(?<!\w)" if _WORD_CHAR.match(spelling[0]) else ""
    after = r"(?!\w)" if _WORD_CHAR.match(spelling[-1]) else ""
    return before + body + after


class TermMatcher:
    """Finds a fixed set of spellings in captions (rules in the module docstring). Immutable."""

    def __init__(self, spellings: Iterable[str]) -> None:
        keys = sorted({key for key in map(canonical, spellings) if key}, key=len, reverse=True)
        self.keys = frozenset(keys)
        alternatives = "|".join(_pattern(key) for key in keys)
        self._regex = re.compile(alternatives, re.IGNORECASE) if keys else None

    def find(self, text: str) -> list[Match]:
        """Occurrences in ``text``, left to right, non-overlapping."""
        if self._regex is None or not text:
            return []
        found = []
        for match in self._regex.finditer(unicodedata.normalize("NFC", text)):
            key = canonical(match.group(0))
            if key in self.keys:  # IGNORECASE folds a few characters differently from casefold()
                found.append(Match(match.start(), match.end(), key))
        return found


class TermFinder:
    """Which of a fixed list of terms occur in captions (by their text or an alternate spelling). Build it
    once per list: ``find`` costs one scan of the caption, not of the list."""

    def __init__(self, terms: Sequence[Term | str]) -> None:
        self._term_of: dict[str, str] = {}
        for term in (Term(t) if isinstance(t, str) else t for t in terms):
            for spelling in (term.text, *term.alternates):
                self._term_of.setdefault(canonical(spelling), term.text)
        self._matcher = TermMatcher(self._term_of)

    def find(self, text: str) -> list[str]:
        """Texts of the terms occurring in ``text``, each once, in order of first occurrence."""
        return list(dict.fromkeys(self._term_of[match.key] for match in self._matcher.find(text)))

    def spans(self, text: str) -> list[Match]:
        """Where the terms occur in ``text`` (``TermMatcher.find``'s rules)."""
        return self._matcher.find(text)


def find_matches(text: str, terms: Sequence[Term | str]) -> list[str]:
    """``TermFinder(terms).find(text)``, for one caption."""
    return TermFinder(terms).find(text)
