"""Evidence for a vocabulary term before a final shows it (issue 35): the second pass's Whisper confirms or
drops each term of a final.

A boosted search can write a term where the audio says something else ("rather selfish" -> "rather a
sulfamethoxazole"); the first pass's term used to be spliced back into the second pass's text whatever the
audio said. Here every term occurrence in the text a final is about to commit is weighed against what
Whisper reads there without any vocabulary: the candidate text and the same text with the term's region
(the term and the neighbouring words the boost changed with it) replaced by the words an unboosted Whisper
decode aligned with them are both scored by Whisper,
teacher-forced (``FinalPassModel.score``). The term stays when the candidate's log-probability is at most
``max_deficit`` below the alternative's: a rare name costs Whisper's language model something, a term the
audio does not carry costs far more (NeMo's CTC word spotter accepts a candidate the same way, against the
greedy text it would replace).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TermCheck:
    """One term occurrence weighed: the candidate's words ``start:end`` (the term and the words around it
    that differ from the unboosted reading), that reading's words for them, and the candidate's
    log-probability minus the alternative's (nats)."""

    term: str
    start: int
    end: int
    alternative: tuple[str, ...]
    margin: float = 0.0

    def kept(self, max_deficit: float) -> bool:
        return self.margin >= -max_deficit


def _bare(word: str) -> str:
    return word.lower().strip(",.?!")


def term_word_spans(text: str, finder: Any) -> list[tuple[str, int, int]]:
    """(matched text, first word, end word) of every term occurrence in ``text`` (whitespace words)."""
    bounds, offset = [], 0
    for word in text.split():
        offset = text.index(word, offset)
        bounds.append((offset, offset + len(word)))
        offset += len(word)
    spans = []
    for match in finder.spans(text):
        covered = [i for i, (a, b) in enumerate(bounds) if a < match.end and b > match.start]
        if covered:
            spans.append((text[match.start : match.end], covered[0], covered[-1] + 1))
    return spans


def aligned_region(
    words: Sequence[str], other: Sequence[str], start: int, end: int
) -> tuple[int, int, tuple[str, ...]]:
    """The region of ``words`` the boost may have changed around ``words[start:end]`` and what ``other``
    says there: the span grown to every block a word alignment finds different that touches it, and the
    words of ``other`` aligned with that region ("John Lehto would have" against "John Dashwood had")."""
    matcher = difflib.SequenceMatcher(
        a=[_bare(w) for w in words], b=[_bare(w) for w in other], autojunk=False
    )
    lo, hi, out = start, end, list[str]()
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            shared_lo, shared_hi = max(a0, start), min(a1, end)
            if shared_lo < shared_hi:
                out.extend(other[b0 + shared_lo - a0 : b0 + shared_hi - a0])
        elif (a0 < end and a1 > start) or (tag == "insert" and start < a0 < end):
            lo, hi = min(lo, a0), max(hi, a1)
            out.extend(other[b0:b1])
    return lo, hi, tuple(out)


def candidates(text: str, plain: str, finder: Any) -> tuple[list[str], list[TermCheck]]:
    """``text`` and, for each term occurrence in it, the text with that term's words replaced by the plain
    (unboosted) decode's words there; the checks to fill with margins, in the same order."""
    words, other = text.split(), plain.split()
    texts, checks = [text], []
    for term, first, last in term_word_spans(text, finder):
        start, end, alternative = aligned_region(words, other, first, last)
        texts.append(" ".join([*words[:start], *alternative, *words[end:]]))
        checks.append(TermCheck(term, start, end, alternative))
    return texts, checks


def apply_checks(text: str, checks: Sequence[TermCheck], max_deficit: float) -> str:
    """``text`` with the region of every term that failed its check replaced by its alternative words (a
    region overlapping one already replaced is left: it was replaced with it)."""
    words = text.split()
    replaced_from = len(words) + 1
    for check in sorted(checks, key=lambda c: c.start, reverse=True):
        if not check.kept(max_deficit) and check.end <= replaced_from:
            words[check.start : check.end] = list(check.alternative)
            replaced_from = check.start
    return " ".join(words)
