"""Vocabulary terms: normalisation and validation at the edge (every bad term is reported, none skipped)."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from biasing.tokenizer import as_tokenizer, canonical_chain, chain_is_reachable, fold

_FORBIDDEN_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Co": "a private-use character",
    "Cs": "a surrogate character",
    "Cn": "an unassigned character",
}


@dataclass(frozen=True)
class Term:
    """One vocabulary entry: its text, a score multiplier, and alternate spellings that count as it."""

    text: str
    weight: float = 1.0
    alternates: tuple[str, ...] = ()


@dataclass(frozen=True)
class TermError:
    """Why the term at ``index`` of the submitted list was rejected (``reason`` is for a person to read)."""

    index: int
    text: str
    reason: str


class TermValidationError(ValueError):
    """Raised with every rejected term of a list; the message lists them all."""

    def __init__(self, errors: Sequence[TermError]) -> None:
        self.errors: list[TermError] = list(errors)
        lines = [f"term {e.index} ({e.text!r}): {e.reason}" for e in self.errors]
        super().__init__(f"{len(self.errors)} invalid term(s):\n" + "\n".join(lines))

    def __reduce__(self) -> tuple[type, tuple[list[TermError]]]:
        return (TermValidationError, (self.errors,))  # picklable: raised in compile worker processes


@dataclass(frozen=True)
class TermLimits:
    """Limits on a vocabulary list; every one is a named, checked parameter."""

    max_chars_per_term: int = 100
    max_tokens_per_term: int = 64
    max_terms: int = 20_000
    max_alternates_per_term: int = 8
    min_weight: float = 0.5  # a boost level (issue 35): 0.5 low, 1 normal (default), 1.5 high, 2 highest
    max_weight: float = 2.0

    def __post_init__(self) -> None:
        for name in ("max_chars_per_term", "max_tokens_per_term", "max_terms", "max_alternates_per_term"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0 < self.min_weight <= self.max_weight or not math.isfinite(self.max_weight):
            raise ValueError("weights need 0 < min_weight <= max_weight < inf")


@dataclass
class _Checker:
    limits: TermLimits
    case_insensitive: bool
    tokenizer: Any
    errors: list[TermError] = field(default_factory=list)

    def spelling(self, index: int, raw: str, what: str) -> str | None:
        """Normalised spelling, or None after recording why it is rejected."""
        if not isinstance(raw, str):
            self.errors.append(TermError(index, repr(raw), f"{what} must be text, got {type(raw).__name__}"))
            return None
        text = " ".join(unicodedata.normalize("NFC", raw).split())
        reason = self._reason(text)
        if reason is not None:
            self.errors.append(TermError(index, raw, f"{what} {reason}"))
            return None
        return text

    def _reason(self, text: str) -> str | None:
        if not text:
            return "is empty"
        for char in text:
            category = unicodedata.category(char)
            if category in _FORBIDDEN_CATEGORIES:
                return f"contains {_FORBIDDEN_CATEGORIES[category]} (U+{ord(char):04X})"
        if len(text) > self.limits.max_chars_per_term:
            return f"has {len(text)} characters; at most {self.limits.max_chars_per_term} are allowed"
        if self.tokenizer is not None:
            return self._tokenizer_reason(text)
        return None

    def _tokenizer_reason(self, text: str) -> str | None:
        if self.case_insensitive:
            chain, num_tokens = canonical_chain(self.tokenizer, text)
            representable = chain_is_reachable(chain, self.tokenizer.span_index())
        else:
            ids = self.tokenizer.ids(text)
            num_tokens = len(ids)
            representable = all(self.tokenizer.surfaces[i] for i in ids)
        if not representable:
            return "cannot be represented by the model's tokenizer (it has characters the model cannot emit)"
        if num_tokens > self.limits.max_tokens_per_term:
            return f"needs {num_tokens} tokens; at most {self.limits.max_tokens_per_term} are allowed"
        return None

    def weight(self, index: int, term: Term) -> float | None:
        weight = term.weight
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
            self.errors.append(TermError(index, term.text, f"weight must be a finite number, got {weight!r}"))
            return None
        if not self.limits.min_weight <= weight <= self.limits.max_weight:
            low, high = self.limits.min_weight, self.limits.max_weight
            self.errors.append(
                TermError(
                    index,
                    term.text,
                    f"weight {weight:g} is outside the accepted range {low:g} to {high:g} "
                    "(0.5 low, 1 normal, 1.5 high, 2 highest)",
                )
            )
            return None
        return float(weight)


def _dedupe_key(text: str, case_insensitive: bool) -> str:
    return fold(text) if case_insensitive else text


def _check_one(checker: _Checker, index: int, item: Term | str) -> Term | None:
    term = Term(item) if isinstance(item, str) else item
    if not isinstance(term, Term):
        checker.errors.append(TermError(index, repr(item), "must be text or a Term"))
        return None
    text = checker.spelling(index, term.text, "term")
    weight = checker.weight(index, term)
    if len(term.alternates) > checker.limits.max_alternates_per_term:
        limit = checker.limits.max_alternates_per_term
        checker.errors.append(TermError(index, term.text, f"has more than {limit} alternate spellings"))
        return None
    alternates = [checker.spelling(index, alt, "alternate spelling") for alt in term.alternates]
    if text is None or weight is None or any(alt is None for alt in alternates):
        return None
    return Term(text, weight, tuple(alt for alt in alternates if alt is not None))


def _merge(first: Term, other: Term, case_insensitive: bool) -> Term:
    """Duplicates collapse into the first: highest weight, union of alternate spellings."""
    seen = {_dedupe_key(first.text, case_insensitive)}
    alternates = []
    for alt in (*first.alternates, other.text, *other.alternates):
        key = _dedupe_key(alt, case_insensitive)
        if key not in seen:
            seen.add(key)
            alternates.append(alt)
    return Term(first.text, max(first.weight, other.weight), tuple(alternates))


def normalize_terms(
    raw: Sequence[Term | str],
    limits: TermLimits = TermLimits(),
    case_insensitive: bool = True,
    tokenizer: Any = None,
) -> list[Term]:
    """Normalise (NFC, collapsed whitespace) and de-duplicate a vocabulary list, in input order.

    Raises ``TermValidationError`` listing every rejected term (index into ``raw``, text, reason). With a
    ``tokenizer`` (the ASR model's), terms the model cannot spell and terms over the token limit are rejected.
    """
    adapter = None if tokenizer is None else as_tokenizer(tokenizer)
    checker = _Checker(limits, case_insensitive, adapter)
    if len(raw) > limits.max_terms:
        raise TermValidationError(
            [
                TermError(
                    limits.max_terms, "", f"the list has {len(raw)} terms; at most {limits.max_terms} allowed"
                )
            ]
        )
    by_key: dict[str, int] = {}
    result: list[Term] = []
    for index, item in enumerate(raw):
        term = _check_one(checker, index, item)
        if term is None:
            continue
        key = _dedupe_key(term.text, case_insensitive)
        if key in by_key:
            position = by_key[key]
            result[position] = _merge(result[position], term, case_insensitive)
        else:
            by_key[key] = len(result)
            result.append(term)
    if checker.errors:
        raise TermValidationError(checker.errors)
    return result
