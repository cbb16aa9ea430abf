"""A transcript's "Add a recording" in a real Chromium on the real engine (issue 47): the meeting's organiser
(a member, not an admin) uploads a WAV of speech, follows the progress bar to done, and the transcript then
shows what was said, the meeting's vocabulary term included; a file that is not audio is refused with the
server's typed message in the status region; another member reading the transcript gets no upload control.
Axe-clean with the control shown."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import TIMEOUT_MS, log_in, screenshot
from tests.compat.conftest import SENTENCE, TERM
from tests.support.media import wav_bytes
from tests.support.server import LiveServer, login, make_settings
from tests.support.speech import spoken

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ORGANISER = {"username": "organiser", "password": "long enough pw"}
READER = {"username": "reader", "password": "long enough pw"}
DECODED = re.compile(r"^decoded (\d+\.\d) of (\d+\.\d) s$")


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """uvicorn with the real engine (bundled model, second pass) and the organiser's and reader's accounts."""
    settings = make_settings(tmp_path_factory.mktemp("recordings"), torch_threads=1)
    with LiveServer(settings) as live:
        admin = login(live.base_url)
        for user in (ORGANISER, READER):
            admin.post("/api/users", json=user).raise_for_status()
        admin.close()
        yield live


@pytest.fixture(scope="module")
def speech_wav_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return wav_bytes(spoken(SENTENCE, tmp_path_factory.mktemp("speech")))


def organisers_meeting(server: LiveServer, title: str) -> int:
    """A meeting the organiser creates, with an organisation vocabulary holding ``TERM``."""
    admin = login(server.base_url)
    vocabulary = admin.post("/api/vocabularies", json={"name": f"{title} names"}).json()["vocabulary"]
    admin.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": [TERM]}).raise_for_status()
    admin.close()
    organiser = login(server.base_url, **ORGANISER)
    created = organiser.post("/api/meetings", json={"title": title, "vocabulary_ids": [vocabulary["id"]]})
    created.raise_for_status()
    meeting_id = created.json()["meeting"]["id"]
    invited = organiser.post(f"/api/meetings/{meeting_id}/members", json={"username": READER["username"]})
    assert invited.status_code == 201, invited.text  # a member who reads it but does not organise it
    organiser.close()
    return meeting_id


def open_as(page: Any, server: LiveServer, meeting_id: int, user: dict[str, str]) -> None:
    log_in(page, server.base_url, f"/transcripts?id={meeting_id}", **user)
    page.wait_for_selector("#transcript", state="visible")


def test_the_organiser_uploads_a_recording_and_its_lines_appear(
    page: Any, real_server: LiveServer, speech_wav_bytes: bytes
) -> None:
    meeting_id = organisers_meeting(real_server, "Recorded ward round")
    open_as(page, real_server, meeting_id, ORGANISER)
    assert page.is_visible("#recording")
    assert page.inner_text("#lines") == "No lines were captioned."
    assert page.get_attribute("#recording-file", "accept") == (
        "audio/*,.wav,.flac,.mp3,.m4a,.ogg,.opus,.webm"
    )
    problems = blocking(axe_violations(page))
    assert not problems, describe("transcript with the recording control, 1280 px", problems)

    file = {"name": "round.wav", "mimeType": "audio/wav", "buffer": speech_wav_bytes}
    page.set_input_files("#recording-file", files=[file])
    page.focus("#recording-form button[type=submit]")
    page.keyboard.press("Enter")  # the keyboard alone submits it
    page.wait_for_selector("#recording-progress", state="visible")
    assert page.inner_text("#recording-name") == "round.wav"
    page.wait_for_selector("#recording-status.ok", timeout=max(TIMEOUT_MS, 120_000))

    assert page.eval_on_selector("#recording-bar", "bar => bar.value") == 1
    decoded = DECODED.match(page.inner_text("#recording-decoded"))
    assert decoded and decoded[1] == decoded[2] and float(decoded[2]) > 3, page.inner_text(
        "#recording-decoded"
    )
    status = page.inner_text("#recording-status")
    assert re.fullmatch(r"round\.wav: \d+ lines? added to the transcript\.", status), status
    lines = page.inner_text("#lines")
    assert "report" in lines and TERM in lines, lines  # decoded with the meeting's vocabulary
    assert page.inner_text("#lines mark.term") == TERM
    assert page.get_attribute("#recording-status", "role") == "status"
    assert page.eval_on_selector("#recording-file", "input => input.files.length") == 0  # ready for another
    screenshot(page, "transcript-recording-1280")
    organiser = login(real_server.base_url, **ORGANISER)
    assert TERM in organiser.get(f"/api/meetings/{meeting_id}/captions?format=text").text  # stored
    organiser.close()


def test_a_file_that_is_not_audio_shows_the_servers_message_and_readers_get_no_control(
    page: Any, browser: Any, real_server: LiveServer
) -> None:
    meeting_id = organisers_meeting(real_server, "Notes, not audio")
    open_as(page, real_server, meeting_id, ORGANISER)
    notes = {"name": "notes.wav", "mimeType": "audio/wav", "buffer": b"just some text, renamed from .txt"}
    page.set_input_files("#recording-file", files=[notes])
    page.click("#recording-form button[type=submit]")
    page.wait_for_selector("#recording-status.error")
    status = page.inner_text("#recording-status")
    assert status.startswith("notes.wav was not added: not an audio file this server decodes"), status
    assert page.is_hidden("#recording-progress")
    assert page.is_enabled("#recording-file")  # the organiser may choose another file
    assert page.inner_text("#lines") == "No lines were captioned."

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        reader = context.new_page()
        open_as(reader, real_server, meeting_id, READER)
        assert reader.is_hidden("#recording")
    finally:
        context.close()
