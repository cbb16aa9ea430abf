"""The captions page on the real engine with the bundled model: the synthesised sentence is recognised.

Skipped until the bundled model (``models/captions-embedded.nemo``) is present."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import BUNDLED_MODEL_PATH
from tests.browser.conftest import SPOKEN, live_meeting, log_in, screenshot
from tests.support.server import LiveServer, login, make_settings

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not BUNDLED_MODEL_PATH.is_file(), reason="the bundled model is not built yet"),
]

WORDS = {w.strip(".").lower() for w in SPOKEN.split()}


def test_bundled_model_captions_the_spoken_sentence(page: object, tmp_path: Path) -> None:
    with LiveServer(make_settings(tmp_path, torch_threads=1)) as server:
        rest = login(server.base_url)
        meeting = live_meeting(rest, "Real model", terms=({"text": "linezolid", "display": "Linezolid"},))
        rest.close()
        log_in(page, server.base_url, f"/?meeting={meeting['id']}")
        page.click("#start")
        page.wait_for_selector("#caption-log .line", timeout=60_000)
        text = page.locator("#caption-log .line").first.inner_text()
        heard = {w.strip(".,").lower() for w in text.split()}
        assert len(heard & WORDS) >= len(WORDS) // 2, text
        screenshot(page, "captions-real-model")
        page.click("#stop")
        page.wait_for_selector("#connection[data-state=stopped]")
