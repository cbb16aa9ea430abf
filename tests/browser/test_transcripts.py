"""The transcript page in a real Chromium (/transcripts): search finds a line in the meetings the user may
read and opens the transcript at it; the organiser corrects a line (the recognized text stays visible under
"Edited"; the export uses the correction), turns the correction into a vocabulary term in one click, renames
and merges speakers; a participant reads without edit controls; axe-clean at 1280 and 390 px."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import log_in, screenshot
from tests.meeting_view.test_feed_and_timeline import MEMBER, _seed_two_speakers

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _accessible(page: Any, where: str) -> None:
    problems = blocking(axe_violations(page))
    assert not problems, describe(where, problems)


def _seed(server: Any, rest: Any) -> tuple[int, int, int]:
    member = rest.post("/api/users", json=MEMBER).json()["user"]["id"]
    admin = rest.get("/api/auth/me").json()["user"]["id"]
    vocabulary = rest.post("/api/vocabularies", json={"name": "Ward terms"}).json()["vocabulary"]
    rest.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": [{"text": "bravo"}]})
    meeting = rest.post(
        "/api/meetings", json={"title": "Ward round", "vocabulary_ids": [vocabulary["id"]]}
    ).json()["meeting"]["id"]
    # seeded in a thread: Playwright's sync API owns this thread's event loop
    worker = threading.Thread(target=_seed_two_speakers, args=(server.settings, meeting, admin, member))
    worker.start()
    worker.join()
    return meeting, admin, member


def test_search_correct_a_line_add_its_term_rename_and_merge(page: Any, server: Any, rest: Any) -> None:
    meeting, admin_id, member_id = _seed(server, rest)
    log_in(page, server.base_url, "/transcripts")
    page.wait_for_selector(f"#meeting-list [data-meeting-id='{meeting}']")
    assert "bravo one" in page.inner_text(f"#meeting-list [data-meeting-id='{meeting}'] .preview")
    page.fill("#search-q", "alpha two")
    page.press("#search-q", "Enter")
    page.wait_for_selector("#hits li a")
    assert page.inner_text("#search-status") == "1 line found."
    _accessible(page, "transcripts index with search results, 1280 px")
    screenshot(page, "transcripts-1280")
    page.click("#hits li a")

    page.wait_for_selector("#lines li.found")
    found = page.locator("#lines li.found")
    assert "alpha two" in found.inner_text()
    assert page.evaluate("document.activeElement.classList.contains('found')")  # opened at that line
    assert page.inner_text("#lines li:nth-child(2) mark.term") == "bravo"  # the meeting's term highlighted

    # correct the admin's first line: the correction shows, the recognized text stays under "Edited"
    first = page.locator("#lines li.line").first
    line_id = first.get_attribute("data-line-id")
    first.locator("button.edit").click()
    page.fill(f"#edit-{line_id}", "alpha halvorsen logistics")
    page.click(f"form[data-line-id='{line_id}'] button[type=submit]")
    page.wait_for_selector(f"#line-{line_id}[data-edited=true]")
    assert page.evaluate("document.activeElement.classList.contains('edit')")  # focus back on its Edit
    page.click(f"#line-{line_id} .original summary")
    page.wait_for_selector(f"#line-{line_id} .history li")
    assert "Recognized: alpha one" in page.inner_text(f"#line-{line_id} .original")
    assert "admin" in page.inner_text(f"#line-{line_id} .history")

    # one click turns the correction into a term of the meeting's vocabulary
    page.wait_for_selector("#suggest .add-term")
    assert page.inner_text("#suggest .add-term") == "Add “halvorsen logistics”"
    page.click("#suggest .add-term")
    page.wait_for_selector("#suggest :text('was added to')")
    vocabularies = rest.get("/api/vocabularies").json()["vocabularies"]
    terms = rest.get(f"/api/vocabularies/{vocabularies[0]['id']}").json()["vocabulary"]["terms"]
    assert "halvorsen logistics" in [t["text"] for t in terms]
    assert page.inner_text(f"#line-{line_id} mark.term") == "halvorsen logistics"
    text = rest.get(f"/api/meetings/{meeting}/captions?format=text").text
    assert "admin: alpha halvorsen logistics" in text and "alpha one" not in text

    # rename the nurse for the whole meeting, then show the admin's lines under her name
    page.fill(f"#speaker-name-{member_id}", "Nurse Joy")
    page.click(f"#speakers [data-user-id='{member_id}'] .rename button")
    page.wait_for_selector("#lines .speaker:text('Nurse Joy')")
    page.select_option(f"#merge-into-{admin_id}", str(member_id))
    page.click(f"#speakers [data-user-id='{admin_id}'] button.merge")
    page.wait_for_selector(f"#speakers [data-user-id='{admin_id}'] button.unmerge")
    assert page.locator("#lines .speaker").all_inner_texts() == ["Nurse Joy"] * 3
    _accessible(page, "transcript editor, 1280 px")
    screenshot(page, "transcript-1280", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    _accessible(page, "transcript editor, 390 px")
    screenshot(page, "transcript-390")


def test_a_participant_reads_without_edit_controls(page: Any, server: Any, rest: Any) -> None:
    meeting, _admin_id, _member_id = _seed(server, rest)
    page.goto(f"{server.base_url}/transcripts?id={meeting}")
    page.fill("#login-username", MEMBER["username"])
    page.fill("#login-password", MEMBER["password"])
    page.click("#login button[type=submit]")
    page.wait_for_selector("#lines li.line")
    assert page.locator("#lines button.edit").count() == 0
    assert page.locator("#speakers form, #speakers button").count() == 0
    assert page.is_hidden("#edit-hint")
    page.set_viewport_size({"width": 390, "height": 844})
    _accessible(page, "transcript read-only, 390 px")
    page.goto(f"{server.base_url}/transcripts")
    page.wait_for_selector(f"#meeting-list [data-meeting-id='{meeting}']")
    assert page.inner_text("#dictation-list") == "No dictations yet: start one on the Dictation page."
    _accessible(page, "transcripts index, 390 px")
