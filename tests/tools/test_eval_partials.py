"""What the screen showed (issue 45 step 5): ``wer_partial`` scores the last partial shown before each final,
beside the finals' WER, for any manifest (with or without a lists.json)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from backend.engine.types import Final, StepResult, StreamOptions
from eval.dataset import load_set
from eval.metrics import score
from eval.report import table, to_row, write_outputs
from eval.runner import RunConfig, RunOutput, ShownPartials, decode_stream, decode_stream_texts


def _step(partial: str, *finals: str) -> StepResult:
    return StepResult(partial=partial, finals=tuple(Final(t, 0.0, 1.0) for t in finals), audio_decoded_s=0.0)


@pytest.mark.parametrize(
    ("steps", "finals", "shown"),
    [
        # the partial grows, then its step's final replaces it: the last non-empty partial was on screen
        ([_step("the"), _step("the cat"), _step("", "The cat sat.")], ["The cat sat."], ["the cat"]),
        # an empty partial (a pause) does not clear what was last shown
        ([_step("hello"), _step(""), _step("", "Hello there.")], ["Hello there."], ["hello"]),
        # a step's partial belongs to the next utterance: read after that step's finals
        ([_step("one"), _step("two", "One."), _step("", "Two.")], ["One.", "Two."], ["one", "two"]),
        # a final with no partial before it: nothing was shown; the second final of one step likewise
        ([_step("", "Fast.")], ["Fast."], [""]),
        ([_step("a b"), _step("", "A b.", "C.")], ["A b.", "C."], ["a b", ""]),
    ],
)
def test_the_partial_shown_before_each_final(
    steps: list[StepResult], finals: list[str], shown: list[str]
) -> None:
    tracker = ShownPartials()
    for step in steps:
        tracker.add(step)
    assert tracker.finals == finals and tracker.shown == shown
    texts = tracker.texts()
    assert texts.finals == " ".join(finals)
    assert texts.shown == " ".join(s for s in shown if s)


@dataclass
class _ScriptedStream:
    """A stream that answers push k with ``script[k]`` and ``finish`` with the entry after the last push."""

    script: Sequence[StepResult]
    chunk_samples: int = 4
    pushed: int = 0

    async def push(self, chunk: np.ndarray) -> StepResult:
        assert len(chunk) == self.chunk_samples
        self.pushed += 1
        return self.script[self.pushed - 1]

    async def finish(self) -> StepResult:
        return self.script[self.pushed]

    def abort(self) -> None:
        return None


class _ScriptedEngine:
    def __init__(self, script: Sequence[StepResult]) -> None:
        self.stream = _ScriptedStream(script)

    def open_stream(self, options: StreamOptions) -> _ScriptedStream:
        return self.stream


def test_decode_stream_keeps_the_partials_that_differ_from_the_finals() -> None:
    # the second pass rewrote the first utterance; the screen showed the first pass's reading until then
    script = [
        _step("the wether"),
        _step("is fine", "The weather"),
        _step("is fine to day"),
        _step(""),
        _step("", "is fine today."),  # finish
    ]
    engine = _ScriptedEngine(script)
    samples = np.zeros(3 * 4 + 1, dtype=np.float32)  # 4 pushes (the last one padded), then finish
    texts = asyncio.run(decode_stream_texts(engine, samples, StreamOptions(1.12, "beam")))  # type: ignore[arg-type]
    assert engine.stream.pushed == 4
    assert texts.finals == "The weather is fine today."
    assert texts.shown == "the wether is fine to day"
    engine = _ScriptedEngine(script)
    assert asyncio.run(decode_stream(engine, samples, StreamOptions(1.12, "beam"))) == texts.finals  # type: ignore[arg-type]


def test_a_live_stream_pushes_each_chunk_once_a_microphone_could_have_recorded_it() -> None:
    """``eval run --live``: chunks are pushed at the pace of speech, not as fast as the engine answers."""

    class _TimedStream(_ScriptedStream):
        times: list[float]

        async def push(self, chunk: np.ndarray) -> StepResult:
            self.times.append(asyncio.get_running_loop().time())
            return await super().push(chunk)

    async def run(realtime: bool) -> list[float]:
        engine = _ScriptedEngine([_step("a")] * 4 + [_step("", "A.")])
        stream = _TimedStream(engine.stream.script, chunk_samples=800)  # 50 ms chunks at 16 kHz
        stream.times = []
        engine.stream = stream
        began = asyncio.get_running_loop().time()
        await decode_stream_texts(
            engine, np.zeros(4 * 800, np.float32), StreamOptions(1.12, "beam"), None, realtime
        )  # type: ignore[arg-type]
        return [t - began for t in stream.times]

    paced = asyncio.run(run(True))
    assert [round(t, 2) >= 0.05 * (k + 1) - 0.005 for k, t in enumerate(paced)] == [True] * 4
    assert paced[-1] < 0.2 + 0.1
    assert asyncio.run(run(False))[-1] < 0.04  # as fast as the engine answers


def _bare_manifest(root: Path, texts: Sequence[str]) -> Path:
    """A training.real_data-style manifest: no lists.json beside it."""
    (root / "wav").mkdir(parents=True)
    lines = []
    for i, text in enumerate(texts):
        sf.write(str(root / "wav" / f"u{i}.wav"), np.zeros(1600, dtype=np.float32), 16000, subtype="PCM_16")
        lines.append(
            json.dumps({"audio_filepath": f"wav/u{i}.wav", "duration": 0.1, "text": text, "utt_id": f"u{i}"})
        )
    (root / "manifest.json").write_text("\n".join(lines) + "\n")
    return root / "manifest.json"


def test_wer_partial_is_scored_like_wer_on_a_manifest_without_lists(tmp_path: Path) -> None:
    refs = ("The weather is fine today.", "Go forward ten meters.")
    eval_set = load_set(_bare_manifest(tmp_path / "set", refs))
    assert eval_set.modes() == set() and eval_set.terms == {}
    assert score(list(refs), list(refs), []).wer == 0.0
    output = RunOutput(
        RunConfig("none", None, "beam", 1.12, None, None),
        hyps=("The weather is fine today.", "go forward ten meters"),
        shown=("the wether is fine", "go forward ten"),
        audio_s=0.2,
    )
    row = to_row(output, eval_set)
    assert row.wer == 0.0 and math.isnan(row.fscore)  # no terms: no keyword figures
    # 9 reference words: "wether" substituted, "today" and "meters" deleted
    assert row.wer_partial == pytest.approx(100 * 3 / 9)
    rendered = table([row]).splitlines()
    heads = [c.strip() for c in rendered[0].split("|")]
    cells = [c.strip() for c in rendered[-1].split("|")]
    assert cells[heads.index("WER partial %")] == f"{100 * 3 / 9:.1f}"
    write_outputs([row], [output], eval_set, tmp_path / "run", {})
    saved = json.loads((tmp_path / "run" / "results.json").read_text())["results"][0]
    assert saved["wer_partial"] == pytest.approx(row.wer_partial)
    hyps = [
        json.loads(line)
        for line in (tmp_path / "run" / "hyps" / "none_beam_1.12s.json").read_text().splitlines()
    ]
    assert [h["shown_partials"] for h in hyps] == ["the wether is fine", "go forward ten"]


def test_rows_without_partials_say_not_available(tmp_path: Path) -> None:
    eval_set = load_set(_bare_manifest(tmp_path / "set", ("a b",)))
    row = to_row(
        RunOutput(RunConfig("none", None, "beam", 1.12, None, None), hyps=("a b",), audio_s=0.1), eval_set
    )
    assert math.isnan(row.wer_partial)
