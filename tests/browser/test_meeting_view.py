"""The meeting view in a real Chromium: a guest follows a live meeting through a view-only link (labelled
lines, greyed partials, renames, a revoked link's error), a member starts a meeting from the home page and
follows it without a microphone, and the admin manages view-only links."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import TIMEOUT_MS, live_meeting, log_in, screenshot
from tests.browser.speech_engine import SENTENCE
from tests.browser.static_site import serve_frontend
from tests.support.server import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MEMBER = {"username": "nurse", "password": "long enough pw"}
SPOKEN = SENTENCE.replace("linezolid", "Linezolid")


def new_page(browser: Any) -> tuple[Any, Any, list[str]]:
    """A page in its own context (no cookies: a guest); its uncaught errors are collected."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    return context, page, errors


def assert_accessible(page: Any, where: str) -> None:
    """axe-core finds no serious or critical violation (as tests/browser/test_accessibility.py)."""
    page.wait_for_timeout(200)
    problems = blocking(axe_violations(page))
    assert not problems, describe(where, problems)


def test_a_guest_follows_every_speaker_through_a_view_only_link(
    page: Any, browser: Any, server: Any, rest: Any
) -> None:
    server.services.hub.feed.poll_s = 0.3
    meeting = live_meeting(rest, "Ward round", terms=({"text": "linezolid", "display": "Linezolid"},))
    made = rest.post(f"/api/meetings/{meeting['id']}/viewer-links", json={"label": "Gallery"}).json()

    guest_context, guest, guest_errors = new_page(browser)
    guest.goto(server.base_url + made["url"])
    guest.wait_for_selector("#connection[data-state=live]")
    assert guest.is_visible("#guest-note") and not guest.is_visible("#login-username")
    assert guest.inner_text("#meeting-title") == "Ward round"
    assert guest.inner_text("#connection-text") == "No one is speaking"  # connected, but no speaker yet

    log_in(page, server.base_url, f"/?meeting={meeting['id']}")  # the speaker, on the captions page
    page.wait_for_function("document.querySelector('#chunk-info').textContent.trim() !== ''")
    page.click("#start")

    guest.wait_for_selector("#speaker-list li[data-state=live]")  # per-speaker status, in a role=status
    assert guest.locator("#speaker-list li").all_inner_texts() == ["admin live"]
    assert guest.inner_text("#connection-text") == "Live"
    guest.wait_for_selector("#partials .partial")  # greyed, labelled, not yet a line
    screenshot(guest, "meeting-view-partial")
    assert guest.locator("#partials .partial .speaker").first.inner_text() == "admin"
    line = guest.locator("#caption-log .line").first
    line.wait_for(timeout=20_000)
    assert line.locator(".speaker").inner_text() == "admin"
    assert line.locator(".text").inner_text() == SPOKEN
    assert line.locator("mark").all_inner_texts() == ["Linezolid"]
    screenshot(guest, "meeting-view-guest")
    assert_accessible(guest, "meeting view, guest, live")

    admin_id = rest.get("/api/auth/me").json()["user"]["id"]
    renamed = rest.put(
        f"/api/meetings/{meeting['id']}/participants/{admin_id}", json={"display_name": "Dr Grey"}
    )
    assert renamed.status_code == 200
    relabelled = (
        "[...document.querySelectorAll('#caption-log .line .speaker')]"
        ".every((s) => s.textContent === 'Dr Grey')"
    )
    guest.wait_for_function(relabelled)
    assert guest.locator("#speaker-list li").all_inner_texts() == ["Dr Grey live"]

    assert rest.delete(f"/api/meetings/{meeting['id']}/viewer-links/{made['link']['id']}").status_code == 200
    guest.wait_for_selector("#page-error[data-code=link_revoked]")
    assert "revoked" in guest.inner_text("#page-error")
    guest.reload()
    guest.wait_for_selector("#page-error[data-code=link_revoked]")
    assert guest.locator("#captions").is_hidden()
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    guest_context.close()
    assert not guest_errors


def test_a_member_starts_a_meeting_from_home_and_follows_it_without_a_microphone(
    page: Any, server: Any, rest: Any
) -> None:
    assert rest.post("/api/users", json=MEMBER).status_code == 201
    page.goto(server.base_url + "/")
    page.fill("#login-username", MEMBER["username"])
    page.fill("#login-password", MEMBER["password"])
    page.click("#login button[type=submit]")
    page.wait_for_selector("#picker:not([hidden])")
    assert "No meetings are open right now" in page.inner_text("#meeting-list")
    assert_accessible(page, "meeting picker with the create form")
    screenshot(page, "home-create-meeting")
    page.fill("#new-meeting-title", "Night handover")
    page.click("#create-meeting button[type=submit]")
    page.wait_for_selector("#captions:not([hidden])")
    assert page.inner_text("#meeting-title") == "Night handover"
    meeting_id = int(page.evaluate("new URLSearchParams(location.search).get('meeting')"))
    assert rest.get(f"/api/meetings/{meeting_id}").json()["meeting"]["status"] == "live"

    page.click("#follow")
    page.wait_for_selector("#connection[data-state=live]")
    assert page.url.endswith(f"/meeting?id={meeting_id}")
    assert page.get_attribute("#speak", "href") == f"/?meeting={meeting_id}"
    page.wait_for_function("document.querySelector('#display-name').value === 'nurse'")
    page.fill("#display-name", "Nurse Joy")
    page.click("#name-form button[type=submit]")
    page.wait_for_selector("#name-status:text('Saved.')")
    assert_accessible(page, "meeting view, member")
    names = {
        p["username"]: p["name"]
        for p in rest.get(f"/api/meetings/{meeting_id}/participants").json()["participants"]
    }
    assert names == {"nurse": "Nurse Joy"}
    assert page.get_attribute("#server-export a[data-format=vtt]", "href").endswith(
        f"/api/meetings/{meeting_id}/captions?format=vtt"
    )

    page.context.clear_cookies()  # a guest with the shared meeting link, no account
    page.goto(f"{server.base_url}/?meeting={meeting_id}")
    page.wait_for_selector("#login-username")
    assert "view-only link from its organiser" in page.inner_text("#login")


def test_admin_creates_lists_and_revokes_view_only_links(page: Any, server: Any, rest: Any) -> None:
    meeting = live_meeting(rest, "Board meeting")
    log_in(page, server.base_url, "/admin#viewer-links")
    page.wait_for_selector("#viewer-link-create")
    page.select_option("#viewer-link-meeting", str(meeting["id"]))
    page.fill("#viewer-link-label", "Press")
    page.fill("#viewer-link-hours", "3")
    page.click("#viewer-link-create button[type=submit]")
    url = page.locator("#viewer-link-url")
    url.wait_for()
    assert "/meeting#link=" in url.input_value()
    row = page.locator("#viewer-links-table tbody tr", has_text="Press")
    assert row.get_attribute("data-status") == "active"
    screenshot(page, "admin-viewer-links")
    assert_accessible(page, "admin view-only links")
    token = url.input_value().split("#link=")[1]
    guest = login(server.base_url)
    guest.cookies.clear()
    assert guest.post("/api/viewer-links/open", json={"token": token}).status_code == 200
    row.get_by_role("button", name="Revoke Press of Board meeting").click()
    page.wait_for_selector("#viewer-links-table tbody tr[data-status=revoked]")
    assert (
        guest.post("/api/viewer-links/open", json={"token": token}).json()["error"]["code"] == "link_revoked"
    )
    guest.close()


ORDER_SCRIPT = """async (finals) => {
  const { MeetingLog } = await import('/static/js/meeting-log.js');
  const log = document.createElement('div');
  const partials = document.createElement('div');
  document.body.append(log, partials);
  const view = new MeetingLog({ log, partials });
  view.setPartial({ session_id: 'b', speaker: { user_id: 2, name: 'Bo' }, text: 'bravo on' });
  const shownPartial = partials.textContent;
  const added = finals.map((f) => view.addFinal(f));
  view.rename(2, 'Dr Bo');
  return {
    added,
    shownPartial,
    partialsLeft: partials.children.length,
    lines: [...log.querySelectorAll('.line')].map(
      (l) => [l.querySelector('.speaker').textContent, l.querySelector('.text').textContent],
    ),
    marks: [...log.querySelectorAll('mark')].map((m) => m.textContent),
  };
}"""


def test_the_meeting_log_orders_lines_on_the_meeting_clock(page: Any) -> None:
    """A final that arrives late (another replica's, through the database) is inserted where it belongs;
    a final shown twice (history and live) once; a final replaces its speaker's partial; renames relabel."""
    serve_frontend(page, "http://frontend.localhost")
    page.goto("http://frontend.localhost/blank")
    a = {"speaker": {"user_id": 1, "name": "Al"}, "session_id": "a", "matched_terms": []}
    b = {"speaker": {"user_id": 2, "name": "Bo"}, "session_id": "b", "matched_terms": ["linezolid"]}
    finals = [
        {**a, "seq": 1, "text": "alpha one", "meeting_start_s": 10.5, "meeting_end_s": 12.0},
        {**a, "seq": 2, "text": "alpha two", "meeting_start_s": 15.0, "meeting_end_s": 16.0},
        {**b, "seq": 1, "text": "bravo on linezolid", "meeting_start_s": 13.0, "meeting_end_s": 14.5},
        {**a, "seq": 1, "text": "alpha one", "meeting_start_s": 10.5, "meeting_end_s": 12.0},
    ]
    result = page.evaluate(ORDER_SCRIPT, finals)
    assert result["added"] == [True, True, True, False]
    assert result["shownPartial"] == "Bo bravo on" and result["partialsLeft"] == 0
    assert result["lines"] == [["Al", "alpha one"], ["Dr Bo", "bravo on linezolid"], ["Al", "alpha two"]]
    assert result["marks"] == ["linezolid"]


def test_two_speakers_and_a_guest_see_one_labelled_timeline_and_the_export_interleaves_them(
    page: Any, browser: Any, server: Any, rest: Any
) -> None:
    """Two people speak into the same meeting from two browsers (each with the fake microphone); a guest
    with a view-only link and no account sees both on one timeline, each line labelled with its speaker's
    name (the member's account display name), in meeting-clock order; the export interleaves them too."""
    server.services.hub.feed.poll_s = 0.3
    meeting = live_meeting(rest, "Handover", terms=({"text": "linezolid", "display": "Linezolid"},))
    created = rest.post("/api/users", json={**MEMBER, "display_name": "Nurse Joy"})
    assert created.status_code == 201, created.text
    added = rest.post(f"/api/meetings/{meeting['id']}/members", json={"username": MEMBER["username"]})
    assert added.status_code == 201, added.text  # meetings are private: the nurse is invited
    link = rest.post(f"/api/meetings/{meeting['id']}/viewer-links", json={}).json()

    guest_context, guest, guest_errors = new_page(browser)
    guest.goto(server.base_url + link["url"])
    guest.wait_for_selector("#connection[data-state=live]")

    log_in(page, server.base_url, f"/?meeting={meeting['id']}")
    page.wait_for_function("document.querySelector('#chunk-info').textContent.trim() !== ''")
    page.click("#start")
    nurse_context, nurse, nurse_errors = new_page(browser)
    nurse.goto(f"{server.base_url}/?meeting={meeting['id']}")
    nurse.fill("#login-username", MEMBER["username"])
    nurse.fill("#login-password", MEMBER["password"])
    nurse.click("#login button[type=submit]")
    nurse.wait_for_selector("#login", state="hidden")
    nurse.wait_for_function("document.querySelector('#chunk-info').textContent.trim() !== ''")
    nurse.click("#start")

    both = (
        "new Set([...document.querySelectorAll('#caption-log .line .speaker')].map((s) => s.textContent))"
        ".size >= 2"
    )
    guest.wait_for_function(both, timeout=40_000)
    lines = guest.eval_on_selector_all(
        "#caption-log .line",
        "els => els.map((e) => [e.querySelector('.speaker').textContent, Number(e.dataset.start)])",
    )
    assert {speaker for speaker, _ in lines} == {"admin", "Nurse Joy"}
    starts = [start for _, start in lines]
    assert starts == sorted(starts)  # one timeline on the meeting's clock
    screenshot(guest, "meeting-view-two-speakers")
    for speaker in (page, nurse):
        speaker.click("#stop")
        speaker.wait_for_selector("#connection[data-state=stopped]")

    text = rest.get(f"/api/meetings/{meeting['id']}/captions", params={"format": "text"}).text.splitlines()
    labels = [line.split("] ", 1)[1].split(":", 1)[0] for line in text]
    assert set(labels) == {"admin", "Nurse Joy"}
    stamps = [line[1:9] for line in text]
    assert stamps == sorted(stamps)
    for context in (guest_context, nurse_context):
        context.close()
    assert not guest_errors and not nurse_errors
