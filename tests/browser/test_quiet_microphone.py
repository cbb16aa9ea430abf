"""A quiet microphone on the real engine (issue 45): the speaker is captioned and told the microphone is very
quiet. The fake microphone plays the test sentence at a peak of -38 dBFS (RMS about -55 dBFS), which the
old absolute silence gate (-45 dBFS RMS) never let reach the decoder: no caption and no word why."""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path

import pytest

from tests.browser.chromium import SPOKEN, chromium_args
from tests.browser.conftest import _chromium, live_meeting, log_in, screenshot
from tests.support.server import LiveServer, login, make_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def letters(text: str) -> str:
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def test_a_quiet_microphone_is_captioned_and_told_so(
    browser: object, speech_wav: Path, tmp_path: Path
) -> None:
    """With the browser's automatic level off (Chromium's own gain control would raise the fake microphone
    within seconds, as it does a real one), the page says "very quiet" and the captions still come."""
    quiet = tmp_path / "quiet.wav"
    subprocess.run(["sox", str(speech_wav), str(quiet), "norm", "-38"], check=True)
    other = browser.browser_type.launch(  # type: ignore[attr-defined]
        executable_path=_chromium(), headless=True, args=chromium_args(quiet)
    )
    try:
        page = other.new_context(viewport={"width": 1280, "height": 800}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        with LiveServer(make_settings(tmp_path, torch_threads=1)) as server:
            rest = login(server.base_url)
            meeting = live_meeting(rest, "Quiet microphone")
            rest.close()
            log_in(page, server.base_url, f"/?meeting={meeting['id']}")
            page.uncheck("#auto-gain")
            page.click("#start")
            page.wait_for_selector("#mic-banner:not([hidden])", timeout=60_000)
            assert "very quiet" in page.locator("#mic-banner").inner_text()
            assert page.locator(".level").get_attribute("data-state") == "quiet"
            page.wait_for_selector("#caption-log .line", timeout=60_000)
            text = page.locator("#caption-log .line").first.inner_text()
            assert difflib.SequenceMatcher(None, letters(text), letters(SPOKEN)).ratio() >= 0.5, text
            screenshot(page, "captions-quiet-microphone")
            page.click("#stop")
            page.wait_for_selector("#connection[data-state=stopped]")
        assert not errors, errors
    finally:
        other.close()
