"""Multi-condition training copies (issue 45 step 3): each link of the chain does what it says, the draws
are reproducible per utterance, and clean speech stays in the mix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import welch

from training.augment import (
    GAIN_DB,
    SAMPLE_RATE,
    change_speed,
    degrade_one,
    lossy_codec,
    rng_for,
    room_bank,
    telephone,
)


def _tone_bursts(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    """Harmonics of 150 Hz up to 7.5 kHz in 0.25 s bursts, with a little noise: something with a wide band."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    audio = sum(np.sin(2 * np.pi * 150 * k * t) / np.sqrt(k) for k in range(1, 50))
    audio = np.where((t // 0.25) % 2 == 0, audio, 0.0) + 0.01 * rng.standard_normal(len(t))
    return (audio * 0.5 / np.abs(audio).max()).astype(np.float32)


@pytest.fixture(scope="module")
def rooms() -> list[np.ndarray]:
    return room_bank(seed=3, n=2)


def test_a_clean_draw_only_changes_the_level(rooms: list[np.ndarray]) -> None:
    audio = _tone_bursts()
    out, done = degrade_one(audio, rng_for(0, "u1"), clean=1.0, rooms=rooms, others=[audio])
    assert len(done) == 1 and done[0].startswith("gain")
    assert len(out) == len(audio)
    ratio = out / np.where(np.abs(audio) > 1e-3, audio, np.nan)
    finite = ratio[np.isfinite(ratio)]
    assert np.allclose(finite, finite[0], rtol=1e-3)  # one gain for the whole utterance
    gain_db = 20 * np.log10(np.abs(out).max()) + 3
    assert GAIN_DB[0] - 0.01 <= gain_db <= min(GAIN_DB[1], 3.0) + 0.01


def test_draws_are_per_utterance_and_reproducible(rooms: list[np.ndarray]) -> None:
    audio = _tone_bursts()
    a, done_a = degrade_one(audio, rng_for(5, "u7"), clean=0.0, rooms=rooms, others=[_tone_bursts(seed=1)])
    b, done_b = degrade_one(audio, rng_for(5, "u7"), clean=0.0, rooms=rooms, others=[_tone_bursts(seed=1)])
    assert done_a == done_b and np.array_equal(a, b)
    kinds = {
        "+".join(degrade_one(audio, rng_for(5, f"u{i}"), 0.0, rooms, [audio])[1][:-1]) for i in range(40)
    }
    assert len(kinds) > 10  # different utterances get different chains


def test_clean_share_is_kept(rooms: list[np.ndarray]) -> None:
    audio = _tone_bursts(0.5)
    clean = sum(
        len(degrade_one(audio, rng_for(0, f"u{i}"), 0.25, rooms, [audio])[1]) == 1 for i in range(400)
    )
    # drawn clean (25 %), plus the chains whose every link was skipped: (1-.5)(1-.5)(1-.7)(1-.3) of the rest
    expected = 400 * (0.25 + 0.75 * 0.5 * 0.5 * 0.3 * 0.7)
    assert abs(clean - expected) < 4 * np.sqrt(expected)


def test_speed_changes_the_duration() -> None:
    audio = _tone_bursts()
    assert len(change_speed(audio, 1.1)) == pytest.approx(len(audio) / 1.1, rel=0.01)
    assert len(change_speed(audio, 0.9)) == pytest.approx(len(audio) / 0.9, rel=0.01)


def test_the_telephone_cuts_the_band() -> None:
    audio = _tone_bursts()
    line = telephone(audio, np.random.default_rng(0))
    freqs, before = welch(audio, fs=SAMPLE_RATE, nperseg=2048)
    _, after = welch(line, fs=SAMPLE_RATE, nperseg=2048)
    high = freqs > 4500
    assert after[high].mean() < before[high].mean() / 100
    mid = (freqs > 800) & (freqs < 2500)
    assert after[mid].mean() > before[mid].mean() / 4


def test_the_codec_round_trip_keeps_length_and_loses_detail() -> None:
    audio = _tone_bursts()
    for seed in range(4):
        out, name = lossy_codec(audio, np.random.default_rng(seed))
        assert name in {"mp3", "vorbis"}
        assert len(out) == len(audio)
        assert 0 < np.mean((out - audio) ** 2) < np.mean(audio**2)


def test_rooms_ring_for_their_reverberation_time(rooms: list[np.ndarray]) -> None:
    for rir in rooms:
        assert 0.2 * SAMPLE_RATE - 1 <= len(rir) <= 1.0 * SAMPLE_RATE + 1
        assert np.argmax(np.abs(rir)) == 0  # the direct sound first
        energy = np.cumsum(rir[::-1].astype(np.float64) ** 2)[::-1]
        assert energy[len(rir) // 2] < energy[0] / 4  # it decays


def test_the_command_writes_a_manifest_with_the_same_texts(tmp_path: Path) -> None:
    import subprocess
    import sys

    entries = []
    for i in range(3):
        wav = tmp_path / f"s{i}.wav"
        sf.write(str(wav), _tone_bursts(1.0, seed=i), SAMPLE_RATE, subtype="PCM_16")
        entries.append({"audio_filepath": str(wav), "duration": 1.0, "text": f"sentence {i}."})
    manifest = tmp_path / "manifest_x.json"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries))
    out = tmp_path / "mc"
    env_path = str(Path(__file__).resolve().parents[2])
    subprocess.run(
        [
            sys.executable,
            "-m",
            "training.augment",
            "--manifest",
            str(manifest),
            "--out",
            str(out),
            "--workers",
            "1",
            "--rooms",
            "1",
        ],
        check=True,
        cwd=env_path,
        capture_output=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in (out / "manifest_x.json").read_text().splitlines()]
    assert [e["text"] for e in lines] == [e["text"] for e in entries]
    for line in lines:
        audio, sr = sf.read(line["audio_filepath"])
        assert sr == SAMPLE_RATE and line["duration"] == pytest.approx(len(audio) / sr, abs=0.001)
        assert line["augment"]
