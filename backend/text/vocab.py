"""Vocabulary terms at the service edge: parse requests and imports, validate, and render captions.

Validation is delegated to ``biasing.terms.normalize_terms`` (NFC, character classes, limits, tokenizer
coverage); this module maps its errors back to the request's indices or the import's line numbers.
"""

from __future__ import annotations

import csv
import hashlib
import io
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from biasing.matching import TermMatcher, canonical
from biasing.terms import Term as BiasTerm
from biasing.terms import TermLimits, TermValidationError, normalize_terms


@dataclass(frozen=True)
class VocabularyTerm:
    """A vocabulary entry at the service's edge: as a user gave it (parsed from a request or an import), then,
    after ``validate_terms``, normalised (``text`` is the form that is compiled; ``key`` de-duplicates).
    ``display`` is how captions show it; ``alternates`` are other spellings that count as it. The biasing
    library's type is ``biasing.terms.Term`` (text, weight, alternates); ``db.models.Term`` is the row."""

    text: str
    weight: float = 1.0
    display: str | None = None
    alternates: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.text.casefold()


@dataclass
class ItemError:
    """One rejected item: its position (request index or 1-based import line), text, and why."""

    position: int
    text: str
    reason: str

    def as_dict(self, position_name: str) -> dict[str, Any]:
        return {position_name: self.position, "text": self.text, "reason": self.reason}


def parse_term_items(items: Any) -> tuple[list[tuple[int, VocabularyTerm]], list[ItemError]]:
    """Parse a JSON ``terms`` array into (index, term) pairs; each malformed item is reported by index."""
    if not isinstance(items, list):
        return [], [ItemError(0, "", "terms must be a JSON array")]
    parsed: list[tuple[int, VocabularyTerm]] = []
    errors: list[ItemError] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            errors.append(ItemError(index, str(item)[:100], "each term needs a text string"))
            continue
        weight = item.get("weight", 1.0)
        display = item.get("display")
        alternates = item.get("alternates") or []
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            errors.append(ItemError(index, item["text"], "weight must be a number"))
            continue
        if display is not None and not isinstance(display, str):
            errors.append(ItemError(index, item["text"], "display must be a string"))
            continue
        if not isinstance(alternates, list) or not all(isinstance(a, str) for a in alternates):
            errors.append(ItemError(index, item["text"], "alternates must be a list of strings"))
            continue
        term = VocabularyTerm(item["text"], float(weight), display or None, tuple(alternates))
        parsed.append((index, term))
    return parsed, errors


def parse_import(fmt: str, content: str) -> tuple[list[tuple[int, VocabularyTerm]], list[ItemError]]:
    """Parse an import file: ``text`` (one term per line, optional ``term<TAB>weight``) or ``csv``
    (columns text, weight, display, alternates separated by ``|``). Blank lines and ``#`` comments are
    ignored; every malformed line is reported with its 1-based line number."""
    rows: list[tuple[int, VocabularyTerm]] = []
    errors: list[ItemError] = []
    if fmt == "text":
        records: Iterable[tuple[int, list[str]]] = (
            (n, line.split("\t")) for n, line in enumerate(content.splitlines(), start=1)
        )
    elif fmt == "csv":
        reader = csv.reader(io.StringIO(content))
        records = ((reader.line_num, row) for row in reader)
    else:
        raise ValueError(f"unknown import format {fmt!r}: expected text or csv")
    for line_no, cells in records:
        if not cells or not cells[0].strip() or cells[0].lstrip().startswith("#"):
            continue
        if fmt == "csv" and line_no == 1 and cells[0].strip().lower() == "text":
            continue
        text = cells[0]
        try:
            weight = float(cells[1]) if len(cells) > 1 and cells[1].strip() else 1.0
        except ValueError:
            errors.append(ItemError(line_no, text, f"weight {cells[1]!r} is not a number"))
            continue
        display = cells[2].strip() or None if len(cells) > 2 else None
        alternates = tuple(a for a in cells[3].split("|") if a.strip()) if len(cells) > 3 else ()
        rows.append((line_no, VocabularyTerm(text, weight, display, alternates)))
    return rows, errors


def validate_terms(
    inputs: Sequence[tuple[int, VocabularyTerm]],
    limits: TermLimits,
    tokenizer: Any = None,
    existing_keys: set[str] | None = None,
) -> tuple[list[tuple[int, VocabularyTerm]], list[ItemError]]:
    """Validate each term (and its alternates) on its own so each error keeps its position.

    Duplicates (case-insensitively, after normalisation) of an earlier item or of ``existing_keys`` are
    errors too: nothing is ever skipped silently."""
    valid: list[tuple[int, VocabularyTerm]] = []
    errors: list[ItemError] = []
    seen = set(existing_keys or ())
    for position, term in inputs:
        texts = [term.text, *term.alternates]
        try:
            normalized = normalize_terms(
                [BiasTerm(text=t, weight=term.weight) for t in texts], limits=limits, tokenizer=tokenizer
            )
        except TermValidationError as exc:
            for error in exc.errors:
                which = "" if error.index == 0 else f" (alternate {texts[error.index]!r})"
                errors.append(ItemError(position, term.text, f"{error.reason}{which}"))
            continue
        main = normalized[0]
        candidate = VocabularyTerm(
            text=main.text,
            weight=main.weight,
            display=term.display.strip() if term.display else None,
            alternates=tuple(t.text for t in normalized[1:]),
        )
        if candidate.key in seen:
            errors.append(ItemError(position, term.text, "duplicate: this term is already in the list"))
            continue
        seen.add(candidate.key)
        valid.append((position, candidate))
    return valid, errors


@dataclass(frozen=True)
class VocabularyEntry:
    """One boosted spelling and what captions show for it."""

    spoken: str
    shown: str
    weight: float
    exact: bool = False  # the display form was given: captions show it, not the model's casing


@dataclass
class EffectiveVocabulary:
    """The union of a meeting's vocabularies (plus a session's extra terms): what is compiled and matched."""

    entries: list[VocabularyEntry] = field(default_factory=list)

    @classmethod
    def from_terms(cls, terms: Iterable[VocabularyTerm]) -> EffectiveVocabulary:
        entries: dict[str, VocabularyEntry] = {}
        for term in terms:
            shown = term.display or term.text
            for spoken in (term.text, *term.alternates):
                entry = VocabularyEntry(spoken, shown, term.weight, exact=term.display is not None)
                entries.setdefault(spoken.casefold(), entry)
        return cls(list(entries.values()))

    def merged_with(self, other: EffectiveVocabulary) -> EffectiveVocabulary:
        """This vocabulary plus ``other``'s entries (an entry already here wins)."""
        entries = {e.spoken.casefold(): e for e in other.entries} | {
            e.spoken.casefold(): e for e in self.entries
        }
        return EffectiveVocabulary(list(entries.values()))

    def bias_terms(self) -> list[BiasTerm]:
        return [BiasTerm(text=e.spoken, weight=e.weight) for e in self.entries]

    def version_key(self) -> str:
        digest = hashlib.sha256()
        for entry in sorted(self.entries, key=lambda e: e.spoken.casefold()):
            digest.update(f"{entry.spoken}\x1f{entry.shown}\x1f{entry.weight}\x1e".encode())
        return digest.hexdigest()[:16]

    @cached_property
    def _matcher(self) -> tuple[TermMatcher, dict[str, VocabularyEntry]]:
        by_key: dict[str, VocabularyEntry] = {}
        for entry in self.entries:
            by_key.setdefault(canonical(entry.spoken), entry)
        return TermMatcher(by_key), by_key

    def apply(self, text: str) -> tuple[str, list[str]]:
        """Find the vocabulary's terms in a caption (``biasing.matching``: case-insensitive, whole words,
        longest first), rewrite each to its display form, and return the new text with the matched display
        forms."""
        if not self.entries or not text:
            return text, []
        matcher, by_key = self._matcher
        matched: list[str] = []
        pieces: list[str] = []
        done = 0
        text = unicodedata.normalize("NFC", text)
        for match in matcher.find(text):
            entry = by_key[match.key]
            if entry.shown not in matched:
                matched.append(entry.shown)
            pieces += [text[done : match.start], _shown(entry, text, match.start, match.end)]
            done = match.end
        pieces.append(text[done:])
        return "".join(pieces), matched


def _shown(entry: VocabularyEntry, text: str, start: int, end: int) -> str:
    """How captions show one found term: its display form. A lower-case entry typed without a display form
    keeps the model's casing (the list says nothing about casing); a lower-case display form
    ("linezolid") is shown in lower case except for a capital the model put at a sentence start."""
    said = text[start:end]
    lower = entry.shown == entry.shown.lower()
    if lower and not entry.exact and entry.shown.casefold() == entry.spoken.casefold():
        return said
    if lower and said[:1].isupper() and _sentence_start(text, start):
        return entry.shown[:1].upper() + entry.shown[1:]
    return entry.shown


def _sentence_start(text: str, position: int) -> bool:
    before = text[:position].rstrip()
    return not before or before[-1] in ".!?"
