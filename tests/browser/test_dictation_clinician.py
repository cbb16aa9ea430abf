"""The clinician's dictation page (issue 30): numbers in written form, paragraphs after a pause or on
"new paragraph", "Your N terms are active", terms edited and removed in place, Stop ends the dictation
(listed as finished), the note is kept on the server and comes back on another device, and a refused
microphone creates no dictation.

A scripted engine (the loudness engine's audio handling) commits one scripted final per spoken sentence of
the fake microphone, with start and end times that put a chosen pause before it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.engine.types import Final, StreamOptions, Word
from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import log_in, screenshot
from tests.browser.speech_engine import LoudnessEngine, LoudnessStream
from tests.browser.static_site import serve_frontend
from tests.support.server import LiveServer, make_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCRIPT = (  # (spoken-form final, pause before it in seconds)
    ("Give six hundred milligrams twice daily.", 0.0),
    ("Review on the third of march.", 0.5),
    ("New paragraph, blood pressure one forty over ninety.", 0.5),
    ("Ten percent better.", 3.0),
)
WRITTEN = "Give 600 mg twice daily. Review on 3 March.\n\nBlood pressure 140/90.\n\n10% better."
SPOKEN = (
    "Give six hundred milligrams twice daily. Review on the third of march.\n\n"
    "Blood pressure one forty over ninety.\n\nTen percent better."
)


@dataclass
class ScriptedStream(LoudnessStream):
    """Each utterance (speech then quiet) commits the next line of ``SCRIPT``, then "Done." lines."""

    said: int = 0
    clock_s: float = 0.0

    def _commit(self) -> tuple[Final, ...]:
        if self.voiced_chunks == 0:
            return ()
        self.voiced_chunks = 0
        text, pause_s = SCRIPT[self.said] if self.said < len(SCRIPT) else ("Done.", 0.5)
        self.said += 1
        start_s = self.clock_s + pause_s
        self.clock_s = start_s + 2.0
        return (Final(text, start_s, self.clock_s, (Word(text.split()[0], start_s, self.clock_s),)),)


@dataclass
class ScriptedEngine(LoudnessEngine):
    def open_stream(self, options: StreamOptions) -> ScriptedStream:
        return ScriptedStream(self, options)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), ScriptedEngine()) as live:
        yield live


def _dictate_script(page: Any) -> str:
    page.click("#start")
    page.wait_for_function("document.querySelector('#note').value.includes('better.')", timeout=40_000)
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    return page.input_value("#note")


def test_written_numbers_and_paragraphs(page: Any, scripted: LiveServer) -> None:
    log_in(page, scripted.base_url, "/dictation")
    assert page.is_checked("#written-numbers")  # written form by default
    assert _dictate_script(page).startswith(WRITTEN)
    screenshot(page, "dictation-written-form")

    page.click("#clear")
    page.uncheck("#written-numbers")
    page.reload()
    page.wait_for_selector("#dictation:not([hidden])")
    assert not page.is_checked("#written-numbers")  # remembered
    assert _dictate_script(page).startswith(SPOKEN)


def test_terms_are_edited_and_removed_and_the_count_is_said_in_words(
    page: Any, server: LiveServer, rest: Any
) -> None:
    vocabulary = rest.post("/api/vocabularies", json={"name": "My terms", "personal": True}).json()[
        "vocabulary"
    ]
    terms = [{"text": "linezolid"}, {"text": "apixaban"}, {"text": "rivaroxaban", "display": "Rivaroxaban"}]
    rest.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": terms}).raise_for_status()
    log_in(page, server.base_url, "/dictation")
    page.wait_for_selector("#terms li[data-term-id]")
    page.click("#start")
    page.wait_for_function("document.querySelector('#ack').textContent.includes('Your 3 terms are active.')")

    page.click("button[aria-label='Edit apixaban']")
    page.wait_for_selector("form.term-edit")
    problems = blocking(axe_violations(page))  # the list with its buttons, and the open edit form
    assert not problems, describe("dictation terms", problems)
    page.fill("form.term-edit input[id$='-display']", "Apixaban")
    page.click("form.term-edit button[type=submit]")
    page.wait_for_selector("#terms li:has-text('Apixaban') button[aria-label='Edit Apixaban']")
    page.wait_for_function("document.querySelector('#ack').textContent === 'Saved. Your 3 terms are active.'")

    page.click("button[aria-label='Remove Rivaroxaban']")  # the fixture's dialog handler confirms
    page.wait_for_function(
        "document.querySelector('#ack').textContent === 'Removed “Rivaroxaban”. Your 2 terms are active.'"
    )
    stored = rest.get(f"/api/vocabularies/{vocabulary['id']}").json()["vocabulary"]["terms"]
    assert sorted((t["text"], t["display"]) for t in stored) == [
        ("apixaban", "Apixaban"),
        ("linezolid", None),
    ]
    assert "Rivaroxaban" not in page.inner_text("#terms")
    screenshot(page, "dictation-terms")

    page.fill("#term-text", "edoxaban")  # added during the dictation: also one of the session's terms
    page.click("#add-term button[type=submit]")
    page.wait_for_function(
        "document.querySelector('#ack').textContent === '“edoxaban” is active now. Your 3 terms are active.'"
    )
    page.click("button[aria-label='Remove edoxaban']")
    page.wait_for_function(
        "document.querySelector('#ack').textContent === 'Removed “edoxaban”. Your 2 terms are active.'"
    )
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")


def test_stop_ends_the_dictation_and_the_note_follows_to_another_device(
    page: Any, server: LiveServer, rest: Any, browser: Any
) -> None:
    log_in(page, server.base_url, "/dictation")
    page.click("#start")
    page.wait_for_selector("#connection[data-state=live]")
    page.wait_for_function("document.querySelector('#note').value.length > 0")
    page.click("#stop")
    page.wait_for_selector("#dictations li[data-status=ended]")
    assert "Finished" in page.inner_text("#dictations")
    dictations = [m for m in rest.get("/api/meetings").json()["meetings"] if m["kind"] == "dictation"]
    assert [m["status"] for m in dictations] == ["ended"]

    note = page.locator("#note")
    note.press("End")
    note.type(" Plan: review in two weeks.")
    page.wait_for_selector("#draft-status[data-state=saved]")
    written = note.input_value()
    assert rest.get(f"/api/drafts/{dictations[0]['id']}").json()["draft"]["text"] == written

    other = browser.new_context()  # another device: no local draft
    try:
        tab = other.new_page()
        log_in(tab, server.base_url, "/dictation")
        tab.wait_for_selector("#copy-status:has-text('saved in your account')")
        assert tab.input_value("#note") == written
    finally:
        other.close()


def test_a_refused_microphone_creates_no_dictation(page: Any) -> None:
    created: list[str] = []

    def dictations(route: Any) -> None:
        created.append(route.request.method)
        route.fulfill(status=500, body="{}")

    user = {"user": {"id": 1, "username": "ana", "role": "member"}, "csrf_token": "t"}
    api = {
        "/api/auth/me": user,
        "/api/vocabularies": {"vocabularies": []},
        "/api/drafts": {"drafts": []},
        "/api/meetings": {"meetings": []},
        "/api/dictations": dictations,
    }
    page.add_init_script(
        "navigator.mediaDevices.getUserMedia = () =>"
        " Promise.reject(new DOMException('no', 'NotAllowedError'));"
    )
    serve_frontend(page, "http://dictation.localhost", api)
    page.goto("http://dictation.localhost/dictation")
    page.click("#start")
    page.wait_for_selector("#page-error:has-text('Microphone access was denied')")
    assert page.locator("#start").is_enabled()
    assert created == []
