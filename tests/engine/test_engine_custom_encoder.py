"""A non-Conformer encoder (our ``WhisperEncoder``, as in the bundled model, un-normalised log mel) runs
through the same engine: exact chunks, batched == alone for greedy and beam, features not re-normalised."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import torch

from backend.engine import Engine, EngineConfig
from tests.engine.conftest import noise
from tests.engine.test_engine_equivalence import PLANS, outputs, run_batched, run_stream, with_decoding
from tests.support.tiny_model import build_tiny_transducer


@pytest.fixture(scope="session")
def whisper_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_transducer(tmp_path_factory.mktemp("whisper"), kind="rnnt", encoder="whisper")


@pytest_asyncio.fixture
async def whisper_engine(whisper_model: Path) -> AsyncIterator[Engine]:
    engine = Engine(EngineConfig(model=str(whisper_model), biasing_alpha=3.0, max_symbols_per_step=3))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_features_follow_the_models_normalisation(whisper_engine: Engine) -> None:
    decoder = whisper_engine._loaded_decoder()
    pipeline = decoder.chunk_pipeline(0.56, "greedy").pipeline
    assert pipeline.subsampling_factor == 8 and pipeline.tokens_per_frame == 7
    audio = torch.from_numpy(noise(1, 2.56))[None, :]
    lengths = torch.tensor([audio.shape[1]])
    features, _ = pipeline.preprocess(audio, lengths, pipeline.expected_feature_buffer_len)
    raw, _ = pipeline.preprocessor(input_signal=audio, length=lengths)
    torch.testing.assert_close(features, raw[:, :, : features.shape[2]])  # normalize: NA -> untouched


async def test_whisper_encoder_batched_equals_alone(whisper_engine: Engine) -> None:
    engine = whisper_engine
    plans = (with_decoding(PLANS, "greedy") + with_decoding(PLANS, "beam"))[::2]
    handles = {
        "a": await engine.load_vocabulary(["recaca", "cahe"]),
        "b": await engine.load_vocabulary(["he re"]),
    }
    batched = await run_batched(engine, plans, handles)
    alone = [await run_stream(engine, plan, handles) for plan in plans]
    for plan, got, want in zip(plans, batched, alone, strict=True):
        assert outputs(got) == outputs(want), plan
    assert await engine.decoder_stream_count() == 0
