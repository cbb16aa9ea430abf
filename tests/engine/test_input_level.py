"""A quiet microphone is captioned, and the speaker hears why it may not be (issue 45, input level).

Before, a stream's leading chunks under -45 dBFS RMS were skipped as silence: a speaker whose speech peaks at
-38 dBFS (RMS about -55) never started the decoder and got nothing at all. Now speech is judged against the
stream's own floor, quiet speech is raised by a slow per-stream gain (held in pauses), and the meter's state
(``quiet`` / ``loud``) comes with each chunk's result for the session to pass on."""

from __future__ import annotations

import difflib
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio

from backend.engine import Engine, StreamOptions
from backend.engine.level import GAIN_BELOW_DBFS, TARGET_DBFS, LevelMeter
from tests.engine.conftest import bundled, normalised
from tests.support.speech import spoken

SENTENCE = "We reviewed the quarterly budget and agreed to hire two more engineers next month"
CHUNK = 8960  # 0.56 s


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return spoken(SENTENCE, tmp_path_factory.mktemp("wav"))


def at_peak(audio: np.ndarray, peak_dbfs: float) -> np.ndarray:
    return (audio * (10 ** (peak_dbfs / 20) / np.abs(audio).max())).astype(np.float32)


def fan(seconds: float, rms_dbfs: float, seed: int = 0) -> np.ndarray:
    """Stationary fan-like noise: low-passed (brown-ish) noise plus a 100 Hz hum, at ``rms_dbfs``."""
    rng = np.random.default_rng(seed)
    n = round(seconds * 16000)
    brown = np.cumsum(rng.standard_normal(n))
    brown -= np.convolve(brown, np.ones(400) / 400, mode="same")  # no drift
    noise = brown / np.std(brown) + 0.5 * np.sin(2 * np.pi * 100 * np.arange(n) / 16000)
    return (noise * 10 ** (rms_dbfs / 20) / np.sqrt(np.mean(noise**2))).astype(np.float32)


def run(meter: LevelMeter, audio: np.ndarray) -> list[tuple[bool, str, float]]:
    """(speech?, state, gain) after each whole chunk."""
    out = []
    for start in range(0, len(audio) - CHUNK + 1, CHUNK):
        meter.process(audio[start : start + CHUNK])
        out.append((meter.active, meter.state, meter.gain_db))
    return out


def test_quiet_speech_is_raised_and_reported_within_3_s(speech: np.ndarray) -> None:
    meter = LevelMeter(0.56)
    readings = run(meter, at_peak(speech, -38.0))
    first = next(i for i, (active, _, _) in enumerate(readings) if active)
    assert first <= 1  # the speech starts the meter at its first chunk (0.5 s of silence lead it)
    assert readings[first][2] >= 20.0  # raised towards the target at once
    assert meter.speech_dbfs is not None and meter.speech_dbfs < GAIN_BELOW_DBFS
    assert abs(meter.speech_dbfs + meter.gain_db - TARGET_DBFS) < 3.0
    quiet_at = next(i for i, (_, state, _) in enumerate(readings) if state == "quiet")
    assert (quiet_at - first + 1) * 0.56 <= 3.0


def test_speech_at_a_normal_level_is_left_as_it_is(speech: np.ndarray) -> None:
    meter = LevelMeter(0.56)
    readings = run(meter, at_peak(speech, -3.0))
    assert any(active for active, _, _ in readings)
    assert all(gain == 0.0 and state == "ok" for _, state, gain in readings)
    chunk = at_peak(speech, -3.0)[CHUNK : 2 * CHUNK]
    assert LevelMeter(0.56).process(chunk) is chunk  # untouched, not even copied


def test_a_fan_alone_is_no_speech_and_is_not_pumped_up() -> None:
    meter = LevelMeter(0.56)
    readings = run(meter, fan(10.0, -40.0))  # louder than the old -45 dBFS gate let through
    assert not any(active for active, _, _ in readings)
    assert all(gain == 0.0 and state == "ok" for _, state, gain in readings)


def test_the_gain_is_held_through_a_pause(speech: np.ndarray) -> None:
    quiet = at_peak(speech, -38.0)
    room = fan(len(quiet) / 16000 + 6.0, -75.0, seed=1)
    audio = room + np.concatenate([quiet, np.zeros(6 * 16000, np.float32)])
    readings = run(LevelMeter(0.56), audio)
    last_speech = max(i for i, (active, _, _) in enumerate(readings) if active)
    held = [gain for _, _, gain in readings[last_speech:]]
    assert held[0] >= 20.0 and max(held) - min(held) < 1e-9  # six seconds of room noise moved nothing


def test_noise_after_a_dropout_is_not_taken_for_speech() -> None:
    chunk = np.concatenate([np.zeros(CHUNK // 2, np.float32), fan(0.28, -50.0)])
    meter = LevelMeter(0.56)
    meter.process(fan(0.56, -50.0))
    assert not meter.measure(chunk) and meter.gain_db == 0.0


def test_clipping_is_reported_loud_and_clears(speech: np.ndarray) -> None:
    meter = LevelMeter(1.12)
    clipped = np.clip(at_peak(speech, 0.0) * 20, -1.0, 1.0)
    states = [state for _, state, _ in run(meter, np.concatenate([clipped, clipped]))]
    assert "loud" in states[:4]  # within 2 chunks of 1.12 s after it starts, plus the lead
    run(meter, at_peak(speech, -6.0))
    assert meter.state == "ok"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bundled_engine() -> AsyncIterator[Engine]:
    async with bundled() as engine:
        yield engine


async def decode(engine: Engine, audio: np.ndarray) -> tuple[str, list[str]]:
    stream = engine.open_stream(StreamOptions(chunk_s=1.12, decoding="greedy"))
    size = stream.chunk_samples
    padded = np.concatenate([audio, np.zeros(-len(audio) % size, np.float32)])
    texts, states = [], []
    for start in range(0, len(padded), size):
        result = await stream.push(padded[start : start + size])
        texts += [final.text for final in result.finals]
        assert result.level is not None
        states.append(result.level.state)
    texts += [final.text for final in (await stream.finish()).finals]
    return normalised(" ".join(texts)), states


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_quiet_microphone_is_captioned_like_a_normal_one(
    bundled_engine: Engine, speech: np.ndarray
) -> None:
    normal, normal_states = await decode(bundled_engine, at_peak(speech, -3.0))
    quiet, quiet_states = await decode(bundled_engine, at_peak(speech, -38.0))
    assert normal and quiet, (normal, quiet)
    similarity = difflib.SequenceMatcher(None, normal.split(), quiet.split()).ratio()
    assert similarity >= 0.8, (normal, quiet)
    assert set(normal_states) == {"ok"}
    assert "quiet" in quiet_states[:4], quiet_states  # 0.5 s lead + 2 s of quiet speech: by the 3rd chunk
