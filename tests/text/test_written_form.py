"""Written form for display (``backend.text.written_form``): a hand-checked table shared with the page's
``written-form.js`` (tests/fixtures/written_form_cases.json), and round trips through ``spoken_form``."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.text.written_form import to_written
from captions_model.spoken_form import number_to_words, ordinal_words, to_spoken_form

CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "written_form_cases.json").read_text("utf-8"))
PLAIN_WORDS = "the patient was seen by someone on the ward and is well today once again".split()
MONTHS = "January February March April May June July August September October November December".split()


def _number(n: int) -> str:
    return f"{n:,}" if n >= 10_000 else str(n)


def _suffix(n: int) -> str:
    return "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_shared_cases(case: dict) -> None:
    assert to_written(case["spoken"], case.get("keep", ())) == case["written"]


def test_shared_cases_cover_the_brief() -> None:
    table = {c["spoken"]: c["written"] for c in CASES}
    assert table["six hundred milligrams twice daily"] == "600 mg twice daily"
    assert table["the twenty third of march"] == "23 March"
    assert table["blood pressure one forty over ninety"] == "blood pressure 140/90"
    assert table["ten percent"] == "10%"
    for unchanged in ("one of the", "no one", "a one-off"):
        assert table[unchanged] == unchanged


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_written_form_is_stable(case: dict) -> None:
    once = to_written(case["spoken"], case.get("keep", ()))
    assert to_written(once, case.get("keep", ())) == once


@given(st.integers(min_value=10, max_value=10**12 - 1))
@settings(max_examples=400)
def test_cardinals_round_trip(n: int) -> None:
    assert to_written(number_to_words(n)) == _number(n)
    assert to_written(f"there were {number_to_words(n)} of them") == f"there were {_number(n)} of them"


@given(st.integers(min_value=0, max_value=9))
def test_a_lone_small_number_stays_a_word_unless_a_unit_follows(n: int) -> None:
    assert to_written(f"take {number_to_words(n)} of them") == f"take {number_to_words(n)} of them"
    assert to_written(f"take {number_to_words(n)} milligrams") == f"take {n} mg"


@given(
    st.integers(min_value=0, max_value=99_999),
    st.sampled_from(["", ".5", ".25", ".05"]),
    st.sampled_from(["mg", "mcg", "g", "kg", "mL", "%"]),
)
@settings(max_examples=300)
def test_doses_round_trip_through_the_spoken_form(whole: int, fraction: str, unit: str) -> None:
    written = f"{whole}{fraction}{'' if unit == '%' else ' '}{unit}"
    spoken = to_spoken_form(f"Give {written} now")
    shown = f"{_number(whole)}{fraction}{'' if unit == '%' else ' '}{unit}"
    assert to_written(spoken) == f"Give {shown} now", spoken


@given(st.integers(min_value=10, max_value=100_000))
def test_ordinals_round_trip(n: int) -> None:
    assert to_written(f"the {ordinal_words(n)} visit") == f"the {n}{_suffix(n)} visit"


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)))
@settings(max_examples=300)
def test_dates_round_trip_through_the_spoken_form(day: date) -> None:
    spoken = to_spoken_form(f"Seen on {day.isoformat()} in clinic")
    assert to_written(spoken) == f"Seen on {day.day} {MONTHS[day.month - 1]} {day.year} in clinic", spoken


@given(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=59), st.sampled_from("ap"))
def test_times_round_trip_through_the_spoken_form(hour: int, minute: int, half: str) -> None:
    spoken = to_spoken_form(f"Review at {hour}:{minute:02d} {half}m today")
    shown = f"{hour}:{minute:02d}" if minute else str(hour)
    assert to_written(spoken) == f"Review at {shown} {half}m today", spoken


@given(st.lists(st.sampled_from(PLAIN_WORDS), max_size=12), st.sampled_from([" ", ", ", ". ", "-"]))
def test_text_without_numbers_is_unchanged(words: list[str], joiner: str) -> None:
    text = joiner.join(words)
    assert to_written(text) == text


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,.-'", max_size=60))
@settings(max_examples=300)
def test_any_text_comes_back_whole_when_it_holds_no_number_words(text: str) -> None:
    converted = to_written(text)
    letters = [c for c in converted if c.isalpha()]
    assert len(letters) <= len([c for c in text if c.isalpha()])
    if not any(ch.isdigit() for ch in converted):
        assert converted == text


def test_kept_terms_are_matched_case_insensitively_and_whole_words_only() -> None:
    assert to_written("Vitamin B Twelve, twelve mg", keep=["vitamin b twelve"]) == "Vitamin B Twelve, 12 mg"
    assert to_written("twelve mg", keep=["twelv"]) == "12 mg"
    assert to_written("twelve mg", keep=["  "]) == "12 mg"
