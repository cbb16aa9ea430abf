"""The bundled model (``models/captions-embedded.nemo``) through the engine: synthetic speech (espeak-ng)
decodes to the expected words with greedy and beam decoding at both chunk sizes.

The bundled model is small (a Whisper-tiny encoder) and streams without look-ahead here, so its spelling is
approximate ("the wever is quitee plasent"); the check is a character similarity with the sentence, which
random or broken decoding (repeated tokens, empty text, shifted audio) stays far below."""

from __future__ import annotations

import difflib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from backend.engine import Engine, EngineConfig, StreamOptions
from captions_model.paths import BUNDLED_MODEL_PATH
from tests.support.speech import spoken

pytestmark = pytest.mark.slow
SENTENCE = "The weather is quite pleasant today and the children are playing in the garden"


def normalised(text: str) -> str:
    return " ".join(re.findall(r"[a-z']+", text.lower()))


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return spoken(SENTENCE, tmp_path_factory.mktemp("wav"))


@pytest_asyncio.fixture
async def bundled_engine() -> AsyncIterator[Engine]:
    if not Path(BUNDLED_MODEL_PATH).is_file():
        pytest.skip(f"{BUNDLED_MODEL_PATH} is not built yet")
    engine = Engine(EngineConfig(model=str(BUNDLED_MODEL_PATH)))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def decode(engine: Engine, audio: np.ndarray, chunk_s: float, decoding: str) -> str:
    samples = engine.chunk_samples(chunk_s)
    padded = np.concatenate([audio, np.zeros(-len(audio) % samples, np.float32)])
    stream = engine.open_stream(StreamOptions(chunk_s=chunk_s, decoding=decoding))  # type: ignore[arg-type]
    texts = []
    for start in range(0, len(padded), samples):
        texts += [f.text for f in (await stream.push(padded[start : start + samples])).finals]
    texts += [f.text for f in (await stream.finish()).finals]
    return " ".join(texts)


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
@pytest.mark.parametrize("chunk_s", [0.56, 1.12])
async def test_synthetic_speech_decodes_to_the_expected_words(
    bundled_engine: Engine, speech: np.ndarray, chunk_s: float, decoding: str
) -> None:
    hypothesis = normalised(await decode(bundled_engine, speech, chunk_s, decoding))
    similarity = difflib.SequenceMatcher(None, normalised(SENTENCE), hypothesis).ratio()
    assert similarity >= 0.6, hypothesis
