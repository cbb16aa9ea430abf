"""Admin page (issue 46): add a member to a meeting by name, delete the meeting, and find both in the
"Access audit" tab."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, screenshot

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
