"""Checks on how a term is written that normalisation would otherwise hide, applied before
``backend.text.vocab.validate_terms`` on every path that stores or uses terms (REST and WebSocket).

The spelling's line breaks and tabs are collapsed into spaces by normalisation, but the text is stored as
typed and exported one term per line, so ``two\\nlines`` would come back as two terms: it is rejected.
Display forms are shown verbatim in captions, so they follow the spelling rules (no control, format,
private-use or surrogate characters such as NUL or U+202E, no line breaks, at most
``max_chars_per_term`` characters).
"""

from __future__ import annotations

import unicodedata

from backend.text.vocab import ItemError, VocabularyTerm
from biasing.terms import TermLimits

_LINE_BREAKS = frozenset("\n\r\t\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029")
_FORBIDDEN = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Co": "a private-use character",
    "Cs": "a surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def _layout_reason(text: str) -> str | None:
    for char in text.strip():
        if char in _LINE_BREAKS:
            return f"contains a line break or tab (U+{ord(char):04X}); one term per line"
    return None


def _display_reason(display: str, limits: TermLimits) -> str | None:
    for char in display:
        category = unicodedata.category(char)
        if category in _FORBIDDEN:
            return f"display form contains {_FORBIDDEN[category]} (U+{ord(char):04X})"
    if len(display.strip()) > limits.max_chars_per_term:
        return f"display form has more than {limits.max_chars_per_term} characters"
    return None


def check_forms(
    inputs: list[tuple[int, VocabularyTerm]], limits: TermLimits
) -> tuple[list[tuple[int, VocabularyTerm]], list[ItemError]]:
    """The inputs whose spelling, alternates and display form are well formed, and an error for each
    other one (by its position)."""
    kept: list[tuple[int, VocabularyTerm]] = []
    errors: list[ItemError] = []
    for position, term in inputs:
        reason = next(
            (r for r in (_layout_reason(t) for t in (term.text, *term.alternates)) if r is not None), None
        )
        if reason is None and term.display is not None:
            reason = _display_reason(term.display, limits)
        if reason is None:
            kept.append((position, term))
        else:
            errors.append(ItemError(position, term.text, reason))
    return kept, errors
