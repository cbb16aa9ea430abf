"""Restart the server mid-stream: the captions page reconnects, resumes, and no line is lost or doubled."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser.conftest import live_meeting, log_in, screenshot
from tests.browser.speech_engine import LoudnessEngine
from tests.browser.test_captions_page import page_lines
from tests.support.server import LiveServer, login, make_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def count_lines(page: object, at_least: int, timeout_ms: int = 20_000) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('#caption-log .line').length >= {at_least}", timeout=timeout_ms
    )


def test_page_resumes_after_server_restart(page: object, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    first = LiveServer(settings, LoudnessEngine()).start()
    try:
        rest = login(first.base_url)
        meeting = live_meeting(rest, "Handover")
        rest.close()
        log_in(page, first.base_url, f"/?meeting={meeting['id']}")
        page.click("#start")
        count_lines(page, 2)
    finally:
        first.stop()  # drains like SIGTERM: `reconnect`, the last finals, close 1012
    page.wait_for_selector("#connection[data-state=reconnecting]")
    assert "Keep talking" in page.inner_text("#connection-banner")  # a banner says what to do (issue 39)
    page.wait_for_function("/s of audio held/.test(document.querySelector('#connection-detail').textContent)")
    screenshot(page, "captions-reconnecting")
    before = page_lines(page)
    page.wait_for_timeout(3500)  # the backoff has grown to a 3-5 s wait

    with LiveServer(settings, LoudnessEngine(), migrate=False) as second:
        back = time.monotonic()
        page.wait_for_selector("#connection[data-state=live]", timeout=30_000)
        waited_s = time.monotonic() - back
        assert waited_s < 2.5, f"live {waited_s:.1f} s after the server was back"  # not when the timer said
        assert page.locator("#connection-banner").is_hidden()
        count_lines(page, len(before) + 2)
        assert page.locator("#caption-log .notice", has_text="Reconnected").count() == 1
        notice = page.locator("#caption-log .notice", has_text="Connection lost")
        assert notice.count() == 1 and "captioned" in notice.inner_text()  # the outage, on the wall clock
        kinds = page.eval_on_selector_all(
            "#caption-log > *", "els => els.map((e) => (e.classList.contains('notice') ? 'notice' : 'line'))"
        )
        assert kinds.index("notice") >= len(before)  # below the lines shown before the outage
        screenshot(page, "captions-reconnected")
        page.click("#stop")
        page.wait_for_selector("#connection[data-state=stopped]")
        rest = login(second.base_url)
        stored = rest.get(f"/api/meetings/{meeting['id']}/captions", params={"format": "json"}).json()
        rest.close()

    lines = page_lines(page)
    assert lines[: len(before)] == before
    sessions = {c["session_id"] for c in stored["captions"]}
    assert len(sessions) == 1, "the reconnect resumed the same session"
    assert [(c["seq"], c["text"]) for c in stored["captions"]] == lines
    assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
