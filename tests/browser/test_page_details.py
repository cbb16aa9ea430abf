"""Small things a participant notices: no stray "…" under the placeholder, no connection badge on the login
screen, no Start on an ended meeting, no toast over the last table row, no toolbar jump on reconnect."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tests.browser.conftest import live_meeting, log_in
from tests.browser.static_site import serve_frontend, unauthorized
from tests.browser.test_capture_errors import API, MEETING

pytestmark = pytest.mark.browser

ORIGIN = "http://captions.localhost"
BOX = "(el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"
TOOLBAR_PARTS = ("#stop", "#microphone", ".level", "#font-smaller", "#contrast", "#announce", "#caption-log")


def boxes(page: Any, selectors: tuple[str, ...]) -> dict[str, list[float]]:
    return {s: page.locator(s).first.evaluate(BOX) for s in selectors}


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_placeholder_has_no_stray_ellipsis(page: Any) -> None:
    serve_frontend(page, ORIGIN, API)
    page.goto(f"{ORIGIN}/?meeting=1")
    page.wait_for_selector("#captions:not([hidden])")
    assert page.inner_text("#caption-log").strip() == "Captions appear here once you start."
    tail = page.locator("#caption-log .partial")
    tail_after = tail.evaluate("(el) => getComputedStyle(el, '::after').content")
    assert tail_after in ("none", "normal"), tail_after


@pytest.mark.parametrize("path", ["/?meeting=1", "/dictation"])
def test_login_screen_shows_no_connection_badge(page: Any, path: str) -> None:
    serve_frontend(page, ORIGIN, {**API, "/api/auth/me": unauthorized})
    page.goto(f"{ORIGIN}{path}")
    page.wait_for_selector("#login-username")
    assert not page.locator("#connection").is_visible()


def test_ended_meeting_cannot_be_started(page: Any) -> None:
    ended = copy.deepcopy(MEETING)
    ended["meeting"]["status"] = "ended"
    serve_frontend(page, ORIGIN, {**API, "/api/meetings/1": ended})
    page.goto(f"{ORIGIN}/?meeting=1")
    page.wait_for_selector("#page-error:has-text('has ended')")
    assert page.locator("#start").is_disabled()
    assert page.locator("#connection").is_visible()


def restarting(socket: Any) -> None:
    """A captions socket that closes at once as a restarting server does (1012): the page reconnects."""
    socket.close(code=1012, reason="restarting")


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_reconnect_button_does_not_move_the_toolbar(page: Any, server: Any, rest: Any, width: int) -> None:
    meeting = live_meeting(rest, "Ward round")
    page.set_viewport_size({"width": width, "height": 800})
    page.route_web_socket(re.compile(r"/ws"), restarting)
    log_in(page, server.base_url, f"/?meeting={meeting['id']}")
    page.click("#start")
    page.wait_for_selector("#connection[data-state=reconnecting]")
    retry = page.get_by_role("button", name="Reconnect now")
    assert retry.is_visible()
    with_retry = boxes(page, TOOLBAR_PARTS)
    retry.evaluate("(el) => { el.hidden = true; }")
    assert boxes(page, TOOLBAR_PARTS) == with_retry


@pytest.mark.slow
def test_toast_does_not_cover_the_last_table_row(page: Any, server: Any, rest: Any) -> None:
    for n in range(12):
        rest.post("/api/meetings", json={"title": f"Meeting {n}", "chunk_s": 0.56}).raise_for_status()
    page.set_viewport_size({"width": 1280, "height": 600})
    log_in(page, server.base_url, "/admin#meetings")
    last = page.locator("#meetings-table tbody tr").last
    last.wait_for()
    page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    last.get_by_role("button", name="Copy link").click()
    toast = page.locator(".toast")
    toast.wait_for()
    page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    assert not overlap(toast.evaluate(BOX), last.evaluate(BOX)), "the toast covers the last row"
