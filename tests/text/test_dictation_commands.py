"""Spoken dictation commands in Python (``backend.text.dictation_commands``): the shared fixture (the page's
JavaScript is held to the same cases in tests/browser/test_dictation_commands.py) and the caption files of
a dictation, where a command's words are dropped and a scratched cue is left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.text.dictation_commands import cue_texts, dictate, parse_utterance

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dictation_commands_cases.json"
CASES = json.loads(FIXTURE.read_text("utf-8"))


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: " | ".join(t for t, _ in c["said"]))
def test_the_shared_cases(case: dict) -> None:
    note, history = case["note"], []
    for text, pause in case["said"]:
        note, history = dictate(note, text, pause, history)
    assert note == case["expected"]


def test_a_command_is_a_whole_phrase() -> None:
    assert parse_utterance("the periodic comma-free review") == ["the periodic comma-free review"]
    assert [
        p if isinstance(p, str) else p.say[0] for p in parse_utterance("Fine.  NEW\nPARAGRAPH. Plan")
    ] == [
        "Fine.",
        "new paragraph",
        "Plan",
    ]


def test_caption_files_carry_out_the_commands_per_cue() -> None:
    said = ["Patient stable full stop no fever", "Rest for a week.", "Scratch that.", "Full stop.", "plan"]
    assert cue_texts(said) == ["Patient stable. No fever.", None, None, None, "Plan"]
    assert cue_texts(["keep this", "drop scratch that", "comma"]) == ["keep this,", None, None]
