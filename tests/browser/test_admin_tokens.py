"""Admin page, API tokens tab: create a read-only token (its secret shown once), revoke a script's token;
the revoked token is refused at once. axe-core finds nothing serious on the tab, desktop and phone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
PAGE_WIDTH = "[document.scrollingElement.scrollWidth, window.innerWidth]"


def _get(base_url: str, token: str, path: str = "/api/vocabularies") -> httpx.Response:
    return httpx.get(base_url + path, headers={"authorization": f"Bearer {token}"})


def test_admin_creates_a_read_token_and_revokes_a_script_token(page: Any, server: Any, rest: Any) -> None:
    created = rest.post("/api/tokens", json={"name": "nightly export", "expires_in_days": 30})
    created.raise_for_status()
    script_token = created.json()["token"]
    assert _get(server.base_url, script_token).status_code == 200

    log_in(page, server.base_url, "/admin")
    page.wait_for_selector("#admin:not([hidden])")
    page.click("[data-tab=tokens]")
    row = page.locator("#tokens-table tbody tr", has_text="nightly export")
    row.wait_for()
    assert "active" in row.inner_text() and "admin" in row.inner_text()

    page.fill("#token-name", "wall display")
    page.select_option("#token-scope", "read")
    page.fill("#token-days", "7")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_selector("#token-secret")
    secret = page.input_value("#token-secret")
    assert page.evaluate("document.activeElement.id") == "token-secret"
    assert _get(server.base_url, secret).status_code == 200
    refused = httpx.post(
        server.base_url + "/api/vocabularies",
        json={"name": "x"},
        headers={"authorization": f"Bearer {secret}"},
    )
    assert refused.status_code == 403
    display = page.locator("#tokens-table tbody tr", has_text="wall display")
    assert "read only" in display.inner_text()
    assert secret not in page.inner_text("#tokens-table")
    found = {"tokens, secret shown": axe_violations(page)}
    screenshot(page, "admin-tokens")

    page.get_by_role("button", name="Revoke nightly export").click()  # the confirm is accepted
    page.wait_for_selector("#tokens-table tr[data-status=revoked]:has-text('nightly export')")
    assert page.locator("#token-secret").count() == 0  # the secret is gone after the next render
    refused_now = _get(server.base_url, script_token)
    assert refused_now.status_code == 401
    assert refused_now.json()["error"]["message"] == "API token revoked"
    assert _get(server.base_url, secret).status_code == 200

    page.set_viewport_size(PHONE)
    page.wait_for_timeout(200)
    width, viewport = page.evaluate(PAGE_WIDTH)
    assert width <= viewport, f"tokens tab is {width} px wide on a {viewport} px phone"
    found["tokens, phone"] = axe_violations(page)
    problems = "\n".join(describe(where, blocking(vs)) for where, vs in found.items() if blocking(vs))
    assert not problems, problems
