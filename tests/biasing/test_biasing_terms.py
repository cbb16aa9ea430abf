"""Term normalisation/validation and caption matching."""

from __future__ import annotations

import pytest

from biasing.matching import find_matches
from biasing.terms import Term, TermLimits, TermValidationError, normalize_terms


def test_normalises_nfc_and_whitespace() -> None:
    terms = normalize_terms(["  Husqvarna \t Group ", "Cafe\u0301"])
    assert terms == [Term("Husqvarna Group"), Term("Caf\u00e9")]


def test_deduplicates_case_insensitively_keeping_the_first_spelling() -> None:
    terms = normalize_terms(["Acme", Term("ACME", weight=2.0), "acme", "Zeta"])
    assert terms == [Term("Acme", 2.0), Term("Zeta")]
    merged = normalize_terms([Term("Acme", alternates=("Acme Corp",)), Term("acme", 1.5, ("ACME Inc",))])
    assert merged == [Term("Acme", 1.5, ("Acme Corp", "ACME Inc"))]
    assert [t.text for t in normalize_terms(["Acme", "ACME"], case_insensitive=False)] == ["Acme", "ACME"]


def test_every_bad_term_is_listed_with_index_and_reason(bpe) -> None:
    raw = [
        "fine",
        "",
        "bad\u200bzero-width",
        "x" * 101,
        Term("weighty", weight=50.0),
        "private\ue000use",
        Term("nan", weight=float("nan")),
        "Ωmega",
        "ok too",
    ]
    with pytest.raises(TermValidationError) as caught:
        normalize_terms(raw, tokenizer=bpe)
    errors = caught.value.errors
    assert [e.index for e in errors] == [1, 2, 3, 4, 5, 6, 7]
    reasons = " | ".join(e.reason for e in errors)
    for expected in (
        "is empty",
        "invisible formatting character (U+200B)",
        "101 characters; at most 100",
        "weight 50 is outside the accepted range 0.5 to 2",
        "private-use",
        "finite number",
        "cannot be represented by the model's tokenizer",
    ):
        assert expected in reasons
    assert "term 7 ('Ωmega')" in str(caught.value)


def test_token_and_list_limits(bpe) -> None:
    with pytest.raises(TermValidationError, match="tokens; at most 3"):
        normalize_terms(
            ["quintessa wexford johnson zolpidem"], TermLimits(max_tokens_per_term=3), tokenizer=bpe
        )
    with pytest.raises(TermValidationError, match="at most 2 allowed"):
        normalize_terms(["a", "b", "c"], TermLimits(max_terms=2))


def test_alternates_are_validated_too() -> None:
    with pytest.raises(TermValidationError, match="alternate spelling contains a control"):
        normalize_terms([Term("acme", alternates=("ac\x07me",))])


def test_find_matches_word_boundaries_and_case() -> None:
    terms = [Term("linezolid"), Term("Husqvarna Group"), Term("dotnet", alternates=(".NET",)), Term("AT&T")]
    caption = "LINEZOLIDS no, but Linezolid yes; husqvarna   group, at&t and .net"
    assert find_matches(caption, terms) == ["linezolid", "Husqvarna Group", "AT&T", "dotnet"]
    assert find_matches("nothing here", terms) == []
    assert find_matches("acme", ["Acme"]) == ["Acme"]
