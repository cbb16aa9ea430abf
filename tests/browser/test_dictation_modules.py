"""The dictation page's pure helpers, loaded in Chromium (no service): how dictated text joins the note
(paragraphs on a pause or on "new paragraph"), the active-terms sentence, the term statistics' note."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser
ORIGIN = "http://frontend.localhost"


@pytest.fixture
def modules(page: Any) -> Any:
    serve_frontend(page, ORIGIN)
    page.goto(f"{ORIGIN}/blank")
    return page


def call(page: Any, module: str, expression: str, arg: object = None) -> Any:
    script = f"async (arg) => {{ const m = await import('/static/js/{module}'); return {expression}; }}"
    return page.evaluate(script, arg)


@pytest.mark.parametrize(
    ("note", "text", "pause", "expected"),
    [
        ("", "Seen today.", False, "Seen today."),
        ("Seen today.", "Well.", False, "Seen today. Well."),
        ("Seen today.\n", "Well.", False, "Seen today.\nWell."),
        ("Seen today.", "Plan below.", True, "Seen today.\n\nPlan below."),
        ("Seen today.  ", "Plan below.", True, "Seen today.\n\nPlan below."),
        ("", "Plan below.", True, "Plan below."),
        ("Seen today.", "New paragraph. plan: rest.", False, "Seen today.\n\nPlan: rest."),
        ("Seen today.", "well, next paragraph plan", False, "Seen today. well\n\nPlan"),
        ("Seen today.", "Fine. New Paragraph.", False, "Seen today. Fine.\n\n"),
        ("Seen today.\n\n", "Plan.", False, "Seen today.\n\nPlan."),
        ("Seen today.", "a renewed paragraphs list", False, "Seen today. a renewed paragraphs list"),
    ],
)
def test_dictated_text_joins_the_note(modules: Any, note: str, text: str, pause: bool, expected: str) -> None:
    got = call(modules, "note-draft.js", "m.appendDictated(arg[0], arg[1], arg[2])", [note, text, pause])
    assert got == expected


def test_the_pause_that_starts_a_paragraph_is_two_seconds(modules: Any) -> None:
    assert call(modules, "note-draft.js", "m.PARAGRAPH_PAUSE_S") == 2


def test_active_terms_are_counted_in_words(modules: Any) -> None:
    got = call(modules, "dictation-terms.js", "[0, 1, 12].map((n) => m.activeTermsText(n))")
    assert got == [
        "No personal terms are active yet: add the words you dictate often.",
        "Your 1 term is active.",
        "Your 12 terms are active.",
    ]


def test_a_term_not_heard_is_not_called_misspelled(modules: Any) -> None:
    got = call(modules, "admin-live.js", "[0, 1, 4].map((n) => m.notHeardNote(n))")
    assert got == ["not used in a meeting yet", "not heard yet in 1 meeting", "not heard yet in 4 meetings"]
    assert not any("spell" in note for note in got)
