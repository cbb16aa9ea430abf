"""The bundled model (``models/captions-embedded.nemo``) through the engine: synthetic speech (espeak-ng)
decodes to the expected words with greedy and beam decoding at both chunk sizes.

The bundled model is small (a Whisper-tiny encoder) and streams without look-ahead here, so its spelling is
approximate ("the wever is quitee plasent"); the check is a character similarity with the sentence, which
random or broken decoding (repeated tokens, empty text, shifted audio) stays far below."""

from __future__ import annotations

import difflib
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio

from backend.engine import Engine, EngineConfig
from captions_model.paths import BUNDLED_MODEL_PATH
from tests.engine.conftest import bundled, normalised, running, stream_finals
from tests.support.speech import spoken

pytestmark = pytest.mark.slow
SENTENCE = "The weather is quite pleasant today and the children are playing in the garden"


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return spoken(SENTENCE, tmp_path_factory.mktemp("wav"))


@pytest_asyncio.fixture
async def bundled_engine() -> AsyncIterator[Engine]:
    async with bundled() as engine:
        yield engine


async def decode(engine: Engine, audio: np.ndarray, chunk_s: float, decoding: str) -> str:
    return " ".join(final.text for final in await stream_finals(engine, audio, chunk_s, decoding))


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
@pytest.mark.parametrize("chunk_s", [0.56, 1.12])
async def test_synthetic_speech_decodes_to_the_expected_words(
    bundled_engine: Engine, speech: np.ndarray, chunk_s: float, decoding: str
) -> None:
    hypothesis = normalised(await decode(bundled_engine, speech, chunk_s, decoding))
    similarity = difflib.SequenceMatcher(None, normalised(SENTENCE), hypothesis).ratio()
    assert similarity >= 0.6, hypothesis


async def test_a_closed_sentence_is_committed_on_a_short_pause(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 37: with ``sentence_pause_ms`` 480, a sentence the model closed with a full stop ends its final
    on a pause shorter than the 800 ms that ends other utterances, also where one 1.12 s chunk holds the
    pause and the next sentence's first word (the cut falls inside the chunk)."""
    first = "We will review the budget again at the next meeting."
    second = "Please send the report before Friday."
    work = tmp_path_factory.mktemp("two")
    audio = np.concatenate([spoken(first, work)[:-24000], spoken(second, work)[4000:]])  # ~0.6 s apart
    async with running(EngineConfig(model=str(BUNDLED_MODEL_PATH), sentence_pause_ms=480)) as engine:
        split = [await stream_finals(engine, audio, chunk_s, "beam") for chunk_s in (0.56, 1.12)]
    for chunk_s, finals in zip((0.56, 1.12), split, strict=True):
        assert len(finals) == 2, (chunk_s, finals)
        assert finals[0].text.endswith(".") and finals[0].end_s < finals[1].start_s, finals
        for final, said in zip(finals, (first, second), strict=True):
            similarity = difflib.SequenceMatcher(None, normalised(said), normalised(final.text)).ratio()
            assert similarity >= 0.6, (chunk_s, final.text)
