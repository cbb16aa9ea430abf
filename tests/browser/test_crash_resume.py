"""kill -9 of the real service mid-speech, with the captions page streaming the fake microphone through the
bundled model: the page keeps its lines, marks the outage, resumes the same session and sends its held audio
again, and no audio is captioned twice (no junk line from a resumed half-word)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.browser.conftest import live_meeting, screenshot
from tests.browser.test_captions_page import page_lines
from tests.support.server import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_kill_9_mid_speech_marks_the_gap_and_loses_or_doubles_nothing(page: object, tmp_path: Path) -> None:
    from loadtest.server import ServerProcess

    with ServerProcess() as server:
        rest = login(server.base_url, "admin", server.admin_password)
        meeting = live_meeting(rest, "Crash", chunk_s=1.12)
        page.goto(f"{server.base_url}/?meeting={meeting['id']}")
        page.fill("#login-username", "admin")
        page.fill("#login-password", server.admin_password)
        page.click("#login button[type=submit]")
        page.wait_for_selector("#login", state="hidden")
        page.wait_for_function("document.querySelector('#chunk-info').textContent.trim() !== ''")
        page.click("#start")
        page.wait_for_selector("#caption-log .line", timeout=90_000)
        before = page_lines(page)

        restart = threading.Thread(target=server.kill_and_restart)  # SIGKILL: nothing drained or flushed
        restart.start()
        page.wait_for_selector("#connection[data-state=reconnecting]", timeout=30_000)
        restart.join(timeout=300)
        page.wait_for_selector("#connection[data-state=live]", timeout=90_000)
        notice = page.locator("#caption-log .notice", has_text="Connection lost")
        notice.wait_for(timeout=30_000)
        page.wait_for_function(
            f"document.querySelectorAll('#caption-log .line').length >= {len(before) + 2}", timeout=90_000
        )
        screenshot(page, "captions-after-kill-9")
        page.click("#stop")
        page.wait_for_selector("#connection[data-state=stopped]", timeout=60_000)
        stored = rest.get(f"/api/meetings/{meeting['id']}/captions").json()["captions"]
        rest.close()

    lines = page_lines(page)
    assert lines[: len(before)] == before  # what was on screen stays
    assert len({c["session_id"] for c in stored}) == 1  # the page resumed the same session
    assert [(c["seq"], c["text"]) for c in stored] == lines  # every stored final shown once, in order
    ordered = sorted(stored, key=lambda c: c["seq"])
    for previous, final in zip(ordered, ordered[1:], strict=False):
        assert final["start_s"] >= previous["end_s"] - 0.1, (previous, final)  # no audio decoded twice
    notices = page.locator("#caption-log .notice").all_inner_texts()
    assert notice.count() >= 1 and all("captioned" in text for text in notices), notices
