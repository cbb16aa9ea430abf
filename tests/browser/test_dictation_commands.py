"""Dictation that behaves like a dictation product, in a real Chromium on real captured audio: spoken commands
are carried out and never written (the page's note and the server's export agree), the page lists them,
the status stops saying "Dictating" after Stop, the dictation is listed under "My dictations" titled by its
first words, and the JavaScript commands agree with backend/text/dictation_commands.py on the shared
fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from backend.engine.types import Final, StreamOptions, Word
from tests.browser.conftest import log_in
from tests.browser.speech_engine import LoudnessEngine, LoudnessStream
from tests.support.server import LiveServer, login, make_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "dictation_commands_cases.json"
SAID = ("Patient stable full stop no fever", "Rest for a week scratch that new paragraph plan comma review")
NOTE = "Patient stable. No fever\n\nPlan, review"


class ScriptedStream(LoudnessStream):
    """Each utterance on the microphone commits the next line of ``SAID``."""

    def _commit(self) -> tuple[Final, ...]:
        if self.voiced_chunks == 0:
            return ()
        self.voiced_chunks = 0
        engine = self.engine
        assert isinstance(engine, ScriptedEngine)
        text = SAID[min(engine.said, len(SAID) - 1)]
        engine.said += 1
        return (
            Final(text, self.start_s, self.decoded_s, (Word(text.split()[0], self.start_s, self.decoded_s),)),
        )


@dataclass
class ScriptedEngine(LoudnessEngine):
    said: int = field(default=0)

    def open_stream(self, options: StreamOptions) -> ScriptedStream:
        return ScriptedStream(self, options)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), ScriptedEngine()) as live:
        yield live


def test_spoken_commands_are_carried_out_never_written(page: Any, scripted: LiveServer) -> None:
    log_in(page, scripted.base_url, "/dictation")
    listed = page.locator("#commands li").all_text_contents()
    assert "“scratch that” or “delete that” — removes what you said last" in listed
    assert "“full stop” or “period” — types “.”" in listed

    # the JavaScript agrees with the Python on every shared case
    cases = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    got = page.evaluate(
        """async (cases) => {
          const m = await import('/static/js/dictation-commands.js');
          return cases.map((c) => {
            let note = c.note, history = [];
            for (const [text, pause] of c.said) {
              ({ note, history } = m.dictate(note, text, { newParagraph: pause, history }));
            }
            return note;
          });
        }""",
        cases,
    )
    assert got == [c["expected"] for c in cases]

    page.click("#start")
    page.wait_for_function("document.querySelector('#ack').textContent.startsWith('Dictating.')")
    page.wait_for_function(
        "(want) => document.querySelector('#note').value === want", arg=NOTE, timeout=30_000
    )
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    assert page.inner_text("#ack") == "Not dictating."
    page.wait_for_selector("#dictations li[data-status=ended]")

    rest = login(scripted.base_url)
    try:
        mine = rest.get("/api/transcripts", params={"kind": "dictation"}).json()["transcripts"]
        assert [(t["status"], t["display_title"]) for t in mine] == [
            ("ended", "Patient stable. No fever Plan, review")
        ]
        text = rest.get(f"/api/meetings/{mine[0]['id']}/captions", params={"format": "text"}).text
        assert [line.split(": ", 1)[1] for line in text.splitlines()] == [
            "Patient stable. No fever",
            "Plan, review",
        ]
    finally:
        rest.close()
    # "My dictations" opens it as a transcript: the commands carried out there too
    page.fill("#note", "")  # nothing left to warn about on the way out
    page.goto(f"{scripted.base_url}/transcripts")
    page.click(f"#dictation-list [data-meeting-id='{mine[0]['id']}'] a")
    page.wait_for_selector("#lines li.line")
    assert page.locator("#lines .text").all_inner_texts() == ["Patient stable. No fever", "Plan, review"]
