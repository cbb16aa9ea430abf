"""The page's written-form converter (``written-form.js``) agrees with ``backend.text.written_form`` on the
shared table and on generated numbers, dates and doses (run in Chromium, no service)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.text.written_form import to_written
from captions_model.spoken_form import number_to_words, ordinal_words, to_spoken_form
from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser
ORIGIN = "http://frontend.localhost"
CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "written_form_cases.json").read_text("utf-8"))
CONVERT = (
    "async (cases) => { const m = await import('/static/js/written-form.js');"
    " return cases.map((c) => m.toWritten(c.spoken, c.keep || [])); }"
)


@pytest.fixture
def module_page(page: object) -> object:
    serve_frontend(page, ORIGIN)
    page.goto(f"{ORIGIN}/blank")
    return page


def test_shared_cases(module_page: object) -> None:
    got = module_page.evaluate(CONVERT, CASES)
    wrong = [(c["spoken"], g, c["written"]) for c, g in zip(CASES, got, strict=True) if g != c["written"]]
    assert not wrong


def test_generated_text_agrees_with_the_python_converter(module_page: object) -> None:
    spoken = [number_to_words(n) for n in (*range(0, 130), 999, 1000, 1050, 12_345, 1_000_001, 987_654_321)]
    spoken += [f"the {ordinal_words(n)} visit" for n in range(1, 120)]
    spoken += [to_spoken_form(f"Give {d} mg at {h}:{m:02d} pm") for d, h, m in ((0.5, 9, 5), (250, 12, 30))]
    spoken += [to_spoken_form(f"Seen {y}-{mo:02d}-{d:02d}.") for y, mo, d in ((1999, 3, 23), (2026, 5, 1))]
    spoken += [
        "in twenty twenty six",
        "bp one twenty over eighty",
        "constructor milligrams",
        "five hasOwnProperty",
    ]
    cases = [{"spoken": s} for s in spoken]
    got = module_page.evaluate(CONVERT, cases)
    assert got == [to_written(s) for s in spoken]
    assert got[spoken.index("one hundred and five")] == "105"
