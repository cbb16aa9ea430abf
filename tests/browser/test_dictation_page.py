"""Dictation: a term added while dictating is saved, sent with `configure`, and acknowledged."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.browser.speech_engine import SENTENCE

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_add_term_mid_dictation_is_acknowledged(page: object, server: object, rest: object) -> None:
    log_in(page, server.base_url, "/dictation")
    page.click("#start")
    page.wait_for_selector("#connection[data-state=live]")
    page.wait_for_function("document.querySelector('#ack').textContent.startsWith('Dictating.')")
    assert "No personal terms are active yet" in page.inner_text("#ack")
    ready_version = re.search(r"version (\S+)", page.get_attribute("#ack", "title")).group(1)

    page.fill("#term-text", "rivaroxaban")
    page.fill("#term-display", "Rivaroxaban")
    page.click("#add-term button[type=submit]")
    page.wait_for_selector("#ack.ok[data-version]")
    acknowledged = page.get_attribute("#ack", "data-version")
    assert acknowledged and acknowledged[:8] != ready_version
    assert page.inner_text("#ack") == "“Rivaroxaban” is active now. Your 1 term is active."
    assert "version" not in page.inner_text("#ack")  # the hash is for support, in the tooltip only
    assert "Rivaroxaban" in page.locator("#terms").inner_text()

    page.wait_for_function(
        "(s) => document.querySelector('#note').value.includes(s)", arg=SENTENCE, timeout=20_000
    )
    page.wait_for_function("document.querySelector('#hearing').textContent.length > 0")
    screenshot(page, "dictation")
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")

    mine = [v for v in rest.get("/api/vocabularies").json()["vocabularies"] if v["personal"]]
    assert [v["name"] for v in mine] == ["My terms"]
    terms = rest.get(f"/api/vocabularies/{mine[0]['id']}").json()["vocabulary"]["terms"]
    assert [(t["text"], t["display"]) for t in terms] == [("rivaroxaban", "Rivaroxaban")]

    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    page.fill("#note", "Edited by hand. " + page.input_value("#note"))
    page.click("#copy")
    page.wait_for_selector("#copy-status:text-is('Copied to the clipboard.')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Edited by hand. ") and SENTENCE in copied

    with page.expect_download() as download:
        page.click("#export")
    assert open(download.value.path(), encoding="utf-8").read() == copied.rstrip() + "\n"
