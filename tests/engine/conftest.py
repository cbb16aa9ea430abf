"""Fixtures for the engine tests: tiny random RNNT/TDT models built once per session (no downloads)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio
import torch

from backend.engine import Engine, EngineConfig, Final, StreamOptions
from captions_model.paths import BUNDLED_MODEL_PATH
from tests.support.tiny_model import build_tiny_transducer

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def rnnt_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_transducer(tmp_path_factory.mktemp("rnnt"), kind="rnnt")


@pytest.fixture(scope="session")
def tdt_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_transducer(tmp_path_factory.mktemp("tdt"), kind="tdt")


@pytest.fixture(scope="session")
def cache_aware_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cache-aware streaming TDT (look-aheads [70, 6] and [70, 13]: 0.56 s and 1.12 s chunks)."""
    return build_tiny_transducer(tmp_path_factory.mktemp("cache-aware"), kind="tdt", encoder="cache_aware")


@pytest.fixture(scope="session")
def cache_aware_rnnt_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same as an RNNT (the recommended production model's decoder kind)."""
    return build_tiny_transducer(
        tmp_path_factory.mktemp("cache-aware-rnnt"), kind="rnnt", encoder="cache_aware"
    )


@pytest.fixture(params=["rnnt", "tdt"])
def model_path(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_model")


@asynccontextmanager
async def running(config: EngineConfig) -> AsyncIterator[Engine]:
    """An engine for ``config``, started, and stopped on the way out."""
    engine = Engine(config)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


@pytest_asyncio.fixture
async def engine(model_path: Path) -> AsyncIterator[Engine]:
    # Random tiny models on synthetic tones and noise: every chunk goes to the decoder as it is (the level
    # gate and gain are the bundled model's concern: tests/engine/test_input_level.py).
    config = EngineConfig(
        model=str(model_path),
        max_wait_ms=20.0,
        biasing_alpha=3.0,
        max_symbols_per_step=3,
        leading_silence_dbfs=None,
        input_gain_max_db=0.0,
    )
    async with running(config) as started:
        yield started


async def finals_of(
    engine: Engine,
    audio: np.ndarray,
    vocabulary: object = None,
    chunk_s: float = 1.12,
    decoding: str = "beam",
) -> list[Final]:
    """Every final of one stream over ``audio``, pushed in exact chunks (the last one zero-padded)."""
    options = StreamOptions(chunk_s=chunk_s, decoding=decoding, vocabulary=vocabulary)  # type: ignore[arg-type]
    stream = engine.open_stream(options)
    size = stream.chunk_samples
    padded = np.concatenate([audio, np.zeros(-len(audio) % size, np.float32)])
    finals: list[Final] = []
    for start in range(0, len(padded), size):
        finals += (await stream.push(padded[start : start + size])).finals
    finals += (await stream.finish()).finals
    return finals


def noise(seed: int, seconds: float) -> np.ndarray:
    """Deterministic babble: tones, noise and silences of random length (random models emit varied text)."""
    rng = np.random.default_rng(seed)
    total = round(seconds * 16000)
    segments, length = [], 0
    while length < total:
        size = int(rng.integers(1280, 6400))
        if rng.random() < 0.2:
            segment = np.zeros(size)
        else:
            t = np.arange(size) / 16000
            tone = rng.uniform(0.05, 0.8) * np.sin(2 * np.pi * rng.uniform(100, 3000) * t)
            segment = tone + rng.uniform(0, 0.3) * rng.standard_normal(size)
        segments.append(segment)
        length += size
    return np.clip(np.concatenate(segments)[:total], -1, 1).astype(np.float32)


def chunks(audio: np.ndarray, chunk_samples: int) -> list[np.ndarray]:
    """Whole chunks of ``audio`` (the tail shorter than a chunk is dropped)."""
    return [audio[i : i + chunk_samples] for i in range(0, len(audio) - chunk_samples + 1, chunk_samples)]


def random_terms(count: int, seed: int) -> list[str]:
    """``count`` distinct made-up terms of one or two lower-case words (the tiny tokenizers spell a-z)."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    terms: set[str] = set()
    while len(terms) < count:
        words = [
            "".join(rng.choice(letters, size=int(rng.integers(3, 9)))) for _ in range(int(rng.integers(1, 3)))
        ]
        terms.add(" ".join(words))
    return sorted(terms)


def normalised(text: str) -> str:
    """Lower-case words only, for comparing transcripts."""
    return " ".join(re.findall(r"[a-z']+", text.lower()))


@asynccontextmanager
async def bundled() -> AsyncIterator[Engine]:
    """The bundled model in an engine with the default settings (skips when the model file is absent)."""
    if not Path(BUNDLED_MODEL_PATH).is_file():
        pytest.skip(f"{BUNDLED_MODEL_PATH} is not built yet")
    async with running(EngineConfig(model=str(BUNDLED_MODEL_PATH))) as engine:
        yield engine


async def stream_finals(engine: Engine, audio: np.ndarray, chunk_s: float, decoding: str) -> list[Final]:
    """Every final of one stream of ``audio`` (zero-padded to whole chunks), in order."""
    samples = engine.chunk_samples(chunk_s)
    padded = np.concatenate([audio, np.zeros(-len(audio) % samples, np.float32)])
    stream = engine.open_stream(StreamOptions(chunk_s=chunk_s, decoding=decoding))  # type: ignore[arg-type]
    finals: list[Final] = []
    for start in range(0, len(padded), samples):
        finals += (await stream.push(padded[start : start + samples])).finals
    finals += (await stream.finish()).finals
    return finals
