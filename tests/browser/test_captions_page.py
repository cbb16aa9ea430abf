"""Captions page end to end: the fake microphone's sentence becomes highlighted finals, export is valid."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from backend.sessions.ladder import Rung
from tests.browser.conftest import live_meeting, log_in, screenshot
from tests.browser.speech_engine import SENTENCE

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FIRST_FINAL_WITHIN_S = 15.0  # the sentence loops every ~4.5 s; the first final needs one loop plus silence
CUE_TIME = r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})"


def parse_webvtt(content: str) -> list[tuple[int, float, float, str]]:
    """(number, start_s, end_s, text) per cue; raises AssertionError on anything malformed."""
    assert content.startswith("WEBVTT"), content[:40]
    cues = []
    for block in content.strip().split("\n\n")[1:]:
        number, timing, *text = block.split("\n")
        match = re.fullmatch(f"{CUE_TIME} --> {CUE_TIME}", timing)
        assert match, timing
        parts = [int(x) for x in match.groups()]
        start = parts[0] * 3600 + parts[1] * 60 + parts[2] + parts[3] / 1000
        end = parts[4] * 3600 + parts[5] * 60 + parts[6] + parts[7] / 1000
        cues.append((int(number), start, end, "\n".join(text)))
    return cues


def page_lines(page: object) -> list[tuple[int, str]]:
    pairs = page.eval_on_selector_all(
        "#caption-log .line", "els => els.map((e) => [Number(e.dataset.seq), e.textContent])"
    )
    return [(seq, text) for seq, text in pairs]


def test_sentence_is_captioned_highlighted_and_exported(page: object, server: object, rest: object) -> None:
    meeting = live_meeting(rest, "Ward round", terms=({"text": "linezolid", "display": "Linezolid"},))
    log_in(page, server.base_url, f"/?meeting={meeting['id']}")
    # the page fills these in once it has fetched the meeting (after the login form hides)
    page.wait_for_function("document.querySelector('#chunk-info').textContent.trim() !== ''", timeout=15000)
    assert page.inner_text("#meeting-title") == "Ward round"
    assert page.inner_text("#chunk-info") == "0.56 s chunks"

    started = time.monotonic()
    page.click("#start")
    page.wait_for_function("document.querySelector('#caption-log .partial').textContent.length > 0")
    assert page.locator("#connection").get_attribute("data-state") == "live"
    page.wait_for_selector("#caption-log .line", timeout=FIRST_FINAL_WITHIN_S * 1000)
    assert time.monotonic() - started < FIRST_FINAL_WITHIN_S

    first = page.locator("#caption-log .line").first
    assert first.inner_text() == SENTENCE.replace("linezolid", "Linezolid")
    assert first.locator("mark").all_inner_texts() == ["Linezolid"]
    assert re.fullmatch(r"\d+:\d{2}\.\d – \d+:\d{2}\.\d", first.get_attribute("title"))
    assert page.locator("#lag").is_visible()

    page.wait_for_function("document.querySelectorAll('#caption-log .line').length >= 2", timeout=15_000)
    page.wait_for_function("document.querySelector('#caption-log .partial').textContent.length > 0")
    screenshot(page, "captions")
    check_admin_sees_live_session(page, server.base_url)

    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    lines = page_lines(page)
    assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
    assert server.services.engine.chunk_sizes == {8960 * 2}  # exactly one 0.56 s chunk per frame

    with page.expect_download() as download:
        page.click("[data-export=vtt]")
    assert download.value.suggested_filename.endswith(".vtt")
    cues = parse_webvtt(Path(download.value.path()).read_text(encoding="utf-8"))
    assert [c[0] for c in cues] == list(range(1, len(lines) + 1))
    assert [c[3] for c in cues] == [text for _, text in lines]
    assert all(start < end for _, start, end, _ in cues)
    assert all(cues[i][2] <= cues[i + 1][1] for i in range(len(cues) - 1))

    stored = rest.get(f"/api/meetings/{meeting['id']}/captions", params={"format": "json"}).json()["captions"]
    assert [(c["seq"], c["text"]) for c in stored] == lines
    check_statistics_count_the_term(page, server.base_url, len(lines))


def check_admin_sees_live_session(page: object, base_url: str) -> None:
    """The admin's live view (same login, another tab) lists this session with its lag."""
    admin = page.context.new_page()
    admin.goto(f"{base_url}/admin#live")
    row = admin.locator("#live-table tbody tr", has_text="Ward round")
    row.wait_for()
    assert "admin" in row.inner_text()
    assert re.search(r"\d+\.\d s", row.locator(".lag").inner_text())
    screenshot(admin, "admin-live")
    admin.close()


def check_statistics_count_the_term(page: object, base_url: str, finals: int) -> None:
    """After the meeting, the statistics tab shows Linezolid's hits and flags nothing as never matched."""
    stats = page.context.new_page()
    stats.goto(f"{base_url}/admin#stats")
    row = stats.locator("#stats-table tbody tr", has_text="linezolid")
    row.wait_for()
    assert row.locator("td.num").inner_text() == str(finals)
    assert stats.locator("#stats-table tr.zero").count() == 0
    stats.close()


def test_session_ended_by_an_admin_is_not_reconnected(page: object, server: object, rest: object) -> None:
    meeting = live_meeting(rest, "Board meeting")
    log_in(page, server.base_url, f"/?meeting={meeting['id']}")
    page.click("#start")
    page.wait_for_selector("#connection[data-state=live]")

    # the replica's degradation ladder (issue 37), as if it had fallen behind and is now recovering: the
    # speaker is told what is simplified while it is, and the banner goes when the ladder is back down
    ladder = server.services.ladder
    ladder.down_after_s = 0.5
    ladder.rung = Rung.FEWER_PARTIALS
    page.wait_for_function("document.querySelector('#load-banner').textContent.includes('simpler decoding')")
    assert page.locator("#load-banner").is_visible()
    page.wait_for_selector("#load-banner", state="hidden", timeout=10000)

    admin = page.context.new_page()
    admin.on("dialog", lambda dialog: dialog.accept())
    admin.goto(f"{server.base_url}/admin#live")
    row = admin.locator("#live-table tbody tr", has_text="Board meeting")
    row.get_by_role("button", name="End session").click()
    admin.wait_for_selector("#live-table tbody tr:has-text('Nobody is live')")
    admin.close()

    page.wait_for_selector("#connection[data-state=ended]")
    assert "ended by an admin" in page.inner_text("#page-error")
    assert page.locator("#start").is_visible()
    page.wait_for_timeout(1500)  # longer than the first reconnect delay: nothing reconnects
    assert page.locator("#connection").get_attribute("data-state") == "ended"
    assert rest.get("/api/live").json()["sessions"] == []
