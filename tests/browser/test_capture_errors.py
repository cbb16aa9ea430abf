"""The captions page explains why it cannot capture: denied or absent microphone, insecure origin.

The page runs against canned API answers (no service needed)."""

from __future__ import annotations

import pytest

from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser

USER = {"user": {"id": 1, "username": "ana", "role": "user"}, "csrf_token": "t"}
MEETING = {
    "meeting": {
        "id": 1,
        "kind": "meeting",
        "title": "Ward round",
        "status": "live",
        "chunk_s": 1.12,
        "decoding": "greedy",
        "vocabulary_ids": [],
        "created_at": None,
        "started_at": None,
        "ended_at": None,
    }
}
API = {"/api/auth/me": USER, "/api/meetings/1": MEETING}


def failing_microphone(error_name: str) -> str:
    return (
        "navigator.mediaDevices.getUserMedia = () =>"
        f" Promise.reject(new DOMException('test', '{error_name}'));"
    )


@pytest.mark.parametrize(
    ("error_name", "expected"),
    [("NotAllowedError", "Microphone access was denied"), ("NotFoundError", "No microphone was found")],
)
def test_microphone_problem_is_explained(page: object, error_name: str, expected: str) -> None:
    page.add_init_script(failing_microphone(error_name))
    serve_frontend(page, "http://captions.localhost", API)
    page.goto("http://captions.localhost/?meeting=1")
    page.click("#start")
    banner = page.locator("#page-error")
    banner.wait_for(state="visible")
    assert expected in banner.inner_text()
    assert page.locator("#start").is_enabled()  # the participant can fix it and try again
    assert page.locator("#connection").get_attribute("data-state") == "idle"


def test_insecure_origin_is_explained_before_asking(page: object) -> None:
    serve_frontend(page, "http://captions.test", API)
    page.goto("http://captions.test/?meeting=1")
    banner = page.locator("#page-error")
    banner.wait_for(state="visible")
    assert "secure" in banner.inner_text() and "https://" in banner.inner_text()
    assert page.locator("#start").is_disabled()
    assert page.locator("#chunk-info").inner_text() == "1.12 s chunks"


def test_text_size_and_contrast_are_remembered(page: object) -> None:
    serve_frontend(page, "http://captions.localhost", API)
    page.goto("http://captions.localhost/?meeting=1")
    page.click("#font-larger")
    page.click("#font-larger")
    page.check("#contrast")
    assert page.inner_text("#font-size") == "130%"
    page.reload()
    page.wait_for_selector("#captions:not([hidden])")
    assert page.inner_text("#font-size") == "130%"
    assert page.locator("#contrast").is_checked()
    assert page.evaluate("document.documentElement.dataset.contrast") == "high"
    scale = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--caption-scale')")
    assert scale.strip() == "1.3"
