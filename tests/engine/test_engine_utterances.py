"""End of utterance: after speech, enough trailing blank frames commit a final mid-stream and the next
utterance starts fresh (greedy: NeMo's endpointer; beam: best beam committed, scores restarted)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from backend.engine import Engine, Final, StreamOptions
from tests.engine.conftest import chunks, noise


@contextmanager
def blank_only(engine: Engine) -> Iterator[None]:
    """Make the model emit nothing but blanks (a silence it recognises), then restore it."""
    asr_model = engine._loaded_decoder().wrapper.asr_model
    output = asr_model.joint.joint_net[-1]
    blank = asr_model.joint.num_classes_with_blank - asr_model.joint.num_extra_outputs - 1
    with torch.no_grad():
        output.bias[blank] += 1000.0
    try:
        yield
    finally:
        with torch.no_grad():
            output.bias[blank] -= 1000.0


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
async def test_trailing_blanks_commit_a_final_and_restart(engine: Engine, decoding: str) -> None:
    stream = engine.open_stream(StreamOptions(chunk_s=0.56, decoding=decoding))  # type: ignore[arg-type]
    finals: list[Final] = []
    for chunk in chunks(noise(1, 2.24), 8960):
        finals += (await stream.push(chunk)).finals
    assert not finals
    with blank_only(engine):
        for chunk in chunks(noise(2, 1.68), 8960):  # 21 blank frames > 800 ms
            result = await stream.push(chunk)
            finals += result.finals
    assert len(finals) == 1 and finals[0].text
    assert result.partial == ""
    for chunk in chunks(noise(3, 2.24), 8960):
        finals += (await stream.push(chunk)).finals
    finals += (await stream.finish()).finals
    assert len(finals) == 2 and finals[1].text
    assert finals[0].end_s <= 2.24 + 4 * 0.08 + 1e-6  # a TDT token may last up to 4 frames
    assert finals[1].start_s >= 2.24 + 1.68 - 1e-6 and finals[1].end_s <= 6.16 + 1e-6


def test_a_final_never_ends_in_a_doubled_mark() -> None:
    """NeMo's greedy pipeline can hand over "decoration.." at an end of utterance (28 of 100 held-out
    utterances with the bundled model); the engine's finals carry one mark, and keep different ones."""
    from types import SimpleNamespace

    from backend.engine.decoder import _convert
    from backend.engine.types import collapse_repeated_marks

    segment = SimpleNamespace(text="decoration..", start=0.8, end=1.6)
    result = SimpleNamespace(
        final_transcript="The act of adding decoration.. ",
        final_segments=[SimpleNamespace(text="The", start=0.0, end=0.2), segment],
        partial_transcript="Next??  one",
    )
    output = _convert(result)
    assert output.finals[0].text == "The act of adding decoration."
    assert [w.text for w in output.finals[0].words] == ["The", "decoration."]
    assert output.partial == "Next? one"
    assert collapse_repeated_marks("Wait... what?! Yes, , no") == "Wait. what?! Yes, , no"
