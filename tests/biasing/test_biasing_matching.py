"""The one term matcher: hand-checked spans, and the service's display-form rewrite built on it."""

from __future__ import annotations

import pytest

from backend.text.vocab import EffectiveVocabulary, VocabularyTerm
from biasing.matching import Match, TermMatcher, canonical, find_matches


def test_spans_are_whole_words_longest_first_and_do_not_overlap() -> None:
    matcher = TermMatcher(["Husqvarna", "Husqvarna Group", "AT&T", ".NET", "group"])
    text = "HUSQVARNA  group said at&t, not at&tx; x.net and Husqvarnas group"
    assert matcher.find(text) == [
        Match(0, 16, "husqvarna group"),  # the longest spelling at a position wins; two spaces match one
        Match(22, 26, "at&t"),
        Match(40, 44, ".net"),  # starts with a non-word character: no boundary needed before it
        Match(60, 65, "group"),  # "Husqvarnas" is another word
    ]
    assert matcher.find("") == [] and TermMatcher([]).find("anything") == []


def test_canonical_form_folds_case_and_whitespace() -> None:
    assert canonical("  Husqvarna \t GROUP ") == "husqvarna group"
    assert canonical("Cafe\u0301") == canonical("Caf\u00e9")  # NFC


def test_find_matches_names_each_term_once_by_its_listed_text() -> None:
    from biasing.terms import Term

    terms = [Term("dotnet", alternates=(".NET",)), Term("Acme")]
    assert find_matches("ACME uses .net; acme again, dotnet too", terms) == ["Acme", "dotnet"]


def test_display_forms_replace_what_the_model_wrote() -> None:
    vocabulary = EffectiveVocabulary.from_terms(
        [
            VocabularyTerm(text="global sign", weight=1.0, display="GlobalSign", alternates=()),
            VocabularyTerm(text="linezolid", weight=1.0, display=None, alternates=()),
            VocabularyTerm(text="husqvarna", weight=1.0, display="Husqvarna", alternates=()),
        ]
    )
    text, matched = vocabulary.apply("Global  sign and Linezolid, then HUSQVARNA.")
    assert text == "GlobalSign and Linezolid, then Husqvarna."  # a lower-case entry keeps the model's casing
    assert matched == ["GlobalSign", "linezolid", "Husqvarna"]
    assert vocabulary.apply("nothing here") == ("nothing here", [])


@pytest.mark.parametrize(
    ("caption", "shown"),
    [
        ("Switch to Halometasone today.", "Switch to halometasone today."),  # mid-sentence: as written
        ("Please stop NIRSEVIMAB now.", "Please stop nirsevimab now."),
        ("Halometasone was stopped. Halometasone again?", "Halometasone was stopped. Halometasone again?"),
        ("halometasone at the start", "halometasone at the start"),  # the model's lower case is kept
    ],
)
def test_a_lower_case_display_form_is_shown_as_written_except_a_sentence_start_capital(
    caption: str, shown: str
) -> None:
    """A display form given in lower case ("halometasone", as drug names are written) is what captions show,
    whatever casing the model chose; a capital at a sentence start stays. Without a display form the
    model's casing is kept (the test above)."""
    vocabulary = EffectiveVocabulary.from_terms(
        [
            VocabularyTerm(text="halometasone", display="halometasone"),
            VocabularyTerm(text="nirsevimab", display="nirsevimab"),
        ]
    )
    assert vocabulary.apply(caption)[0] == shown
