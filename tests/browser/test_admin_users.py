"""Admin page, Users tab (item 6): create a user with an initial password, and one with an invite link; the
invitee opens the link, sets a password and logs in to Dictation; a used link is refused. axe-core finds
nothing serious on the tab and on the invite page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "long enough pw"


def test_admin_creates_users_and_an_invitee_sets_a_password(page: Any, server: Any, browser: Any) -> None:
    log_in(page, server.base_url, "/admin#users")
    page.wait_for_selector("#users-table tbody tr")

    page.fill("#user-username", "nurse")
    page.check("#user-access-password")
    page.fill("#user-password", PASSWORD)
    page.get_by_role("button", name="Create user").click()
    page.wait_for_selector("#users-table tr[data-status=active]:has-text('nurse')")
    assert page.locator("#invite-link").count() == 0

    page.fill("#user-username", "okafor")
    page.fill("#user-display-name", "Dr Okafor")
    page.select_option("#user-role", "member")
    page.get_by_role("button", name="Create user").click()  # an invite link is the default
    page.wait_for_selector("#invite-link")
    link = page.input_value("#invite-link")
    assert link.startswith(f"{server.base_url}/invite#token=")
    assert page.evaluate("document.activeElement.id") == "invite-link"
    row = page.locator("#users-table tr[data-status=invited]", has_text="okafor")
    assert "Dr Okafor" in row.inner_text() and "Invited" in row.inner_text()
    found = {"users tab": axe_violations(page)}
    screenshot(page, "admin-users")

    other = browser.new_context()  # the invitee's own browser
    try:
        tab = other.new_page()
        tab.goto(link)
        tab.wait_for_selector("#invite-form:not([hidden])")
        assert "Dr Okafor" in tab.inner_text("#invite-who")
        found["invite page"] = axe_violations(tab)
        tab.fill("#invite-password", PASSWORD)
        tab.fill("#invite-repeat", PASSWORD + "x")
        tab.click("#invite-form button[type=submit]")
        assert "differ" in tab.inner_text("#invite-error")
        tab.fill("#invite-repeat", PASSWORD)
        tab.click("#invite-form button[type=submit]")
        tab.wait_for_selector("#invite-done:not([hidden])")
        assert tab.inner_text("#invite-username") == "okafor"
        assert "token" not in tab.url  # the spent token left the address bar

        tab.goto(f"{server.base_url}/dictation")
        tab.fill("#login-username", "okafor")
        tab.fill("#login-password", PASSWORD)
        tab.click("#login button[type=submit]")
        tab.wait_for_selector("#dictation:not([hidden])")

        tab.goto(link)  # a second use is refused
        tab.wait_for_selector("#invite-problem:not([hidden])")
        assert "used already" in tab.inner_text("#invite-problem")
    finally:
        other.close()

    page.reload()
    page.wait_for_selector("#users-table tr[data-status=active]:has-text('okafor')")
    problems = "\n".join(describe(where, blocking(vs)) for where, vs in found.items() if blocking(vs))
    assert not problems, problems
