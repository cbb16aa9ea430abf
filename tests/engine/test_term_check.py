"""``backend.engine.term_check``: which words stand in for a term, which terms a final keeps (issue 35)."""

from __future__ import annotations

from backend.engine.term_check import TermCheck, aligned_region, apply_checks, candidates, term_word_spans
from biasing.matching import TermFinder

FINDER = TermFinder(["Halvorsen", "Gravavex Labs", "antiplasmins"])


def test_term_spans_are_whole_words_of_the_text() -> None:
    text = "Revenue from Gravavex Labs grew, said Halvorsen."
    assert term_word_spans(text, FINDER) == [("Gravavex Labs", 2, 4), ("Halvorsen", 6, 7)]
    assert term_word_spans("halvorsened twice", FINDER) == []


def test_the_alternative_is_what_the_plain_decode_says_in_the_terms_place() -> None:
    words = "He was not Antiplasmins young man?".split()
    plain = "He was not an ill disposed young man.".split()
    assert aligned_region(words, plain, 3, 4) == (3, 4, ("an", "ill", "disposed"))
    same = "We met Halvorsen today.".split()
    assert aligned_region(same, "We met Halverson today.".split(), 2, 3) == (2, 3, ("Halverson",))
    assert aligned_region(same, "We met today.".split(), 2, 3) == (2, 3, ())
    # the words the boost changed with the term go with it (LibriVox: "John Dashwood had" -> "John Lehto
    # would have"): the region grows to the whole block that differs, the name's first word stays
    hijacked = "And Mr. John Lehto would have then leisure.".split()
    read = "And Mr. John Dashwood had then leisure.".split()
    assert aligned_region(hijacked, read, 2, 4) == (2, 6, ("John", "Dashwood", "had"))


def test_candidates_hold_one_alternative_per_term() -> None:
    texts, checks = candidates(
        "Revenue from Gravavex Labs grew, said Halvorsen.",
        "Revenue from the mobile app grew, said Hal.",
        FINDER,
    )
    assert texts[0] == "Revenue from Gravavex Labs grew, said Halvorsen."
    assert texts[1] == "Revenue from the mobile app grew, said Halvorsen."
    assert texts[2] == "Revenue from Gravavex Labs grew, said Hal."
    assert [c.term for c in checks] == ["Gravavex Labs", "Halvorsen"]


def test_a_term_far_below_the_plain_words_is_replaced_and_a_close_one_stays() -> None:
    text = "Revenue from Gravavex Labs grew, said Halvorsen."
    checks = [
        TermCheck("Gravavex Labs", 2, 4, ("the", "mobile", "app"), margin=-25.0),
        TermCheck("Halvorsen", 6, 7, ("Hal.",), margin=-3.0),
        TermCheck("Gravavex", 2, 3, ("the",), margin=-30.0),  # overlaps a region already replaced
    ]
    assert apply_checks(text, checks, max_deficit=8.0) == "Revenue from the mobile app grew, said Halvorsen."
    assert apply_checks(text, checks, max_deficit=30.0) == text
    assert apply_checks(text, checks, max_deficit=1.0) == "Revenue from the mobile app grew, said Hal."
