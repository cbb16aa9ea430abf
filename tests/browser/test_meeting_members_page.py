"""Issue 46 in the pages: on the admin page an admin adds a member to a meeting by name, deletes the meeting
and finds both in the "Access audit" tab; on the meeting's transcript page its organiser (no admin) does the
same in "Who can read it", and a member who is not the organiser gets no such card."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import log_in, screenshot
from tests.support.server import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_admin_adds_a_member_deletes_the_meeting_and_sees_it_in_the_audit(
    page: Any, server: Any, rest: Any
) -> None:
    rest.post("/api/users", json={"username": "nurse", "password": "long enough pw"}).raise_for_status()
    meeting = rest.post("/api/meetings", json={"title": "Ward round"}).json()["meeting"]
    log_in(page, server.base_url, "/admin#meetings")
    page.get_by_role("button", name="Members of Ward round").click()
    page.fill(f"#member-name-{meeting['id']}", "nurse")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_selector(f"#members-{meeting['id']} li:has-text('nurse')")
    members = rest.get(f"/api/meetings/{meeting['id']}/members").json()["members"]
    assert [m["username"] for m in members] == ["nurse"]
    screenshot(page, "admin-meeting-members")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Ward round").click()
    page.wait_for_selector("#meetings-table td:has-text('No meetings yet.')")
    assert rest.get(f"/api/meetings/{meeting['id']}").status_code == 404

    page.click("a[data-tab=audit]")
    page.wait_for_selector("#audit-table tbody tr:has-text('delete')")
    text = page.inner_text("#audit-table")
    assert "member_added" in text and f"meeting {meeting['id']}" in text


def open_transcript(page: Any, server: Any, meeting_id: int, username: str) -> None:
    path = f"/transcripts?id={meeting_id}"
    log_in(page, server.base_url, path, username=username, password="long enough pw")


def test_the_organiser_manages_members_reads_the_record_and_deletes_on_the_transcript_page(
    page: Any, browser: Any, server: Any, rest: Any
) -> None:
    for username in ("organiser", "nurse"):
        rest.post("/api/users", json={"username": username, "password": "long enough pw"}).raise_for_status()
    organiser = login(server.base_url, "organiser", "long enough pw")
    nurse = login(server.base_url, "nurse", "long enough pw")
    meeting = organiser.post("/api/meetings", json={"title": "Case conference"}).json()["meeting"]
    assert nurse.get(f"/api/meetings/{meeting['id']}/transcript").status_code == 404  # private by default

    open_transcript(page, server, meeting["id"], "organiser")
    page.wait_for_selector("#privacy", state="visible")
    page.fill("#member-name", "nurse")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_selector("#member-list li:has-text('nurse')")
    assert nurse.get(f"/api/meetings/{meeting['id']}/transcript").status_code == 200
    page.fill("#member-name", "nobody")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_selector("#privacy-status.error")
    assert page.inner_text("#privacy-status") == "nobody was not added: username: no such user"
    page.check("#visibility")
    page.wait_for_selector("#privacy-status:has-text('Everyone in the organisation')")
    assert organiser.get(f"/api/meetings/{meeting['id']}").json()["meeting"]["visibility"] == "organisation"
    page.click("#audit summary")
    page.wait_for_selector("#audit-list li:has-text('member_added')")
    assert "nurse · read" in page.inner_text("#audit-list")  # the member's read above, with who
    problems = blocking(axe_violations(page))
    assert not problems, describe("the transcript page's privacy card", problems)
    screenshot(page, "transcript-who-can-read-it")

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        member_page = context.new_page()
        open_transcript(member_page, server, meeting["id"], "nurse")
        member_page.wait_for_selector("#transcript", state="visible")
        assert member_page.is_hidden("#privacy")  # a member reads; only the organiser or an admin manages
    finally:
        context.close()

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-meeting")
    page.wait_for_selector("#page-notice:has-text('Case conference')")
    assert organiser.get(f"/api/meetings/{meeting['id']}").status_code == 404
    assert "Case conference" not in page.inner_text("#meeting-list")
