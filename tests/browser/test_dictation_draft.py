"""A dictated note is not lost by leaving the page: leaving asks first while the note was never copied or
exported, and the note comes back (from this device's storage) on return."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in
from tests.browser.speech_engine import SENTENCE

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ADDED = " Plan: review tomorrow."


class Dialogs:
    """Records each dialog's type and message and answers it with ``accept``."""

    def __init__(self, tab: Any) -> None:
        self.seen: list[tuple[str, str]] = []
        self.accept = False
        tab.on("dialog", self.answer)

    def answer(self, dialog: Any) -> None:
        self.seen.append((dialog.type, dialog.message))
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


def test_dictated_note_survives_leaving_and_leaving_warns(page: Any, server: Any) -> None:
    log_in(page, server.base_url, "/dictation")
    tab = page.context.new_page()  # the fixture's page accepts every dialog; this one records them
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    dialogs = Dialogs(tab)
    tab.goto(f"{server.base_url}/dictation")
    tab.click("#start")
    tab.wait_for_function("(s) => document.querySelector('#note').value.includes(s)", arg=SENTENCE)
    tab.click("#stop")
    tab.wait_for_selector("#connection[data-state=stopped]")
    note = tab.locator("#note")
    note.press("End")
    note.type(ADDED)
    written = note.input_value()
    assert SENTENCE in written and written.endswith(ADDED)

    tab.get_by_role("link", name="Captions").click()  # dismissed: the page stays
    assert dialogs.seen and dialogs.seen[-1][0] == "confirm" and "not been copied" in dialogs.seen[-1][1]
    assert tab.url.endswith("/dictation") and note.input_value() == written

    dialogs.accept = True
    tab.get_by_role("link", name="Captions").click()
    tab.wait_for_url(f"{server.base_url}/")
    assert [kind for kind, _ in dialogs.seen] == ["confirm", "confirm"]  # no second, beforeunload, prompt

    tab.goto(f"{server.base_url}/dictation")
    tab.wait_for_selector("#copy-status:has-text('Restored your unsaved note')")
    assert note.input_value() == written

    note.press("End")
    note.type(" Again.")  # a user gesture: Chromium only asks before unload after one
    tab.goto(f"{server.base_url}/admin")
    assert dialogs.seen[-1][0] == "beforeunload"

    tab.goto(f"{server.base_url}/dictation")
    tab.wait_for_selector("#copy-status:has-text('Restored')")
    assert note.input_value() == written + " Again."
    with tab.expect_download():
        tab.click("#export")
    asked = len(dialogs.seen)
    tab.get_by_role("link", name="Captions").click()  # exported: nothing is lost, nothing is asked
    tab.wait_for_url(f"{server.base_url}/")
    assert len(dialogs.seen) == asked

    tab.goto(f"{server.base_url}/dictation")
    tab.wait_for_selector("#copy-status:has-text('Restored')")
    tab.click("#clear")  # confirmed: the draft goes with the note
    assert note.input_value() == ""
    tab.reload()
    tab.wait_for_selector("#dictation:not([hidden])")
    assert note.input_value() == "" and tab.inner_text("#copy-status") == ""
    tab.close()
    assert not errors, errors
