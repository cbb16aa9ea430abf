"""Degraded copies of a manifest (issue 45): each condition's measurable property, and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import welch

from eval.degrade import (
    BABBLE_SNR_DB,
    NOISE_SNR_DB,
    QUIET_PEAK_DBFS,
    RT60_S,
    SAMPLE_RATE_HZ,
    Babble,
    mu_law,
    noise,
    phone,
    quiet,
    reverb,
    rng_for,
    room_impulse_response,
)

BURST_S = 0.5


def _speechlike(seconds: float = 4.0, seed: int = 0) -> np.ndarray:
    """Bursts of modulated harmonic sound, ``BURST_S`` on and ``BURST_S`` of digital silence off, peak 0.5."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    voiced = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 12)) * (
        1 + 0.5 * np.sin(2 * np.pi * 4 * t)
    )
    voiced = voiced + 0.2 * rng.standard_normal(len(t))
    on = (t // BURST_S) % 2 == 0
    audio = np.where(on, voiced, 0.0)
    return (audio * 0.5 / np.abs(audio).max()).astype(np.float32)


def _snr_over_bursts(clean: np.ndarray, mixed: np.ndarray) -> float:
    """SNR computed apart from the module: power over the samples where the bursts are on."""
    on = np.abs(clean) > 0
    added = mixed.astype(np.float64) - clean
    return float(10 * np.log10(np.mean(clean[on].astype(np.float64) ** 2) / np.mean(added[on] ** 2)))


def test_noise_is_20_db_under_the_speech() -> None:
    clean = _speechlike()
    mixed = noise(clean, rng_for(0, "noise", "u"))
    assert len(mixed) == len(clean)
    assert _snr_over_bursts(clean, mixed) == pytest.approx(NOISE_SNR_DB, abs=1.0)
    # the fan has low-frequency weight (brown noise, 50 Hz hum): more power under 200 Hz than in 2-4 kHz
    freqs, psd = welch(mixed - clean, fs=SAMPLE_RATE_HZ, nperseg=4096)
    assert psd[(freqs > 20) & (freqs < 200)].mean() > 10 * psd[(freqs > 2000) & (freqs < 4000)].mean()


def _fake_talker(text: str, voice: str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash((text, voice))) % 2**32)
    t = np.arange(round(0.06 * len(text) * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    return (rng.standard_normal(len(t)) * (1 + np.sin(2 * np.pi * 3 * t)) * 0.1).astype(np.float32)


def test_babble_is_three_talkers_10_db_under_the_speech() -> None:
    voices: set[str] = set()

    def speak(text: str, voice: str) -> np.ndarray:
        voices.add(voice)
        return _fake_talker(text, voice)

    clean = _speechlike()
    mixed = Babble(speak)(clean, rng_for(0, "babble", "u"))
    assert len(voices) == 3
    assert _snr_over_bursts(clean, mixed) == pytest.approx(BABBLE_SNR_DB, abs=1.0)
    again = Babble(_fake_talker)(clean, rng_for(0, "babble", "u"))
    assert np.array_equal(mixed, again)


def test_quiet_peaks_at_minus_38_dbfs() -> None:
    out = quiet(_speechlike(), rng_for(0, "quiet", "u"))
    assert 20 * np.log10(np.abs(out).max()) == pytest.approx(QUIET_PEAK_DBFS, abs=0.05)


def test_phone_keeps_only_the_telephone_band() -> None:
    white = (np.random.default_rng(1).standard_normal(4 * SAMPLE_RATE_HZ) * 0.1).astype(np.float32)
    out = phone(white, rng_for(0, "phone", "u"))
    assert len(out) == len(white)
    freqs, psd = welch(out, fs=SAMPLE_RATE_HZ, nperseg=2048)
    band = psd[(freqs > 500) & (freqs < 3000)].mean()
    assert psd[(freqs > 20) & (freqs < 150)].mean() < band * 10 ** (-25 / 10)
    assert psd[freqs > 4200].mean() < band * 10 ** (-30 / 10)  # nothing above 8 kHz sampling's 4 kHz


def test_mu_law_has_256_levels_and_keeps_the_signal() -> None:
    x = np.linspace(-1, 1, 100_001)
    y = mu_law(x)
    assert len(np.unique(y)) <= 256
    assert np.all(np.abs(y - x) <= 0.03 * np.abs(x) + 1e-4)  # logarithmic steps: ~3 % error at any level


def _rt60_schroeder(rir: np.ndarray) -> float:
    """RT60 from the Schroeder decay's -5 to -25 dB slope (T20 x 3)."""
    energy = np.cumsum(rir[::-1] ** 2)[::-1]
    decay_db = 10 * np.log10(energy / energy[0])
    t5 = np.argmax(decay_db <= -5) / SAMPLE_RATE_HZ
    t25 = np.argmax(decay_db <= -25) / SAMPLE_RATE_HZ
    return 3 * (t25 - t5)


def test_the_room_rings_for_about_half_a_second() -> None:
    rir = room_impulse_response(rng_for(0, "reverb", "u"))
    assert np.argmax(np.abs(rir)) == 0
    assert _rt60_schroeder(rir) == pytest.approx(RT60_S, abs=0.2)
    clean = _speechlike(2.0)
    wet = reverb(clean, rng_for(0, "reverb", "u"))
    assert len(wet) == len(clean) + round(RT60_S * SAMPLE_RATE_HZ)
    assert np.abs(wet).max() == pytest.approx(np.abs(clean).max(), rel=1e-3)
    # after a burst stops the room still sounds, 20-30 dB down 0.3 s later
    stop = round(BURST_S * SAMPLE_RATE_HZ)
    early = np.mean(wet[stop : stop + 800].astype(np.float64) ** 2)
    late = np.mean(wet[stop + 4800 : stop + 5600].astype(np.float64) ** 2)
    assert early > 0 and 5 < 10 * np.log10(early / late) < 40


def _manifest(root: Path) -> Path:
    (root / "wav").mkdir(parents=True)
    lines = []
    for i in range(2):
        sf.write(str(root / "wav" / f"u{i}.wav"), _speechlike(1.5, seed=i), SAMPLE_RATE_HZ, subtype="PCM_16")
        lines.append(
            json.dumps(
                {"audio_filepath": f"wav/u{i}.wav", "duration": 1.5, "text": f"text {i}", "utt_id": f"u{i}"}
            )
        )
    (root / "manifest.json").write_text("\n".join(lines) + "\n")
    (root / "lists.json").write_text(json.dumps({"terms": {}, "lists": {}}))
    return root / "manifest.json"


def test_the_command_writes_a_manifest_per_condition_deterministically(tmp_path: Path) -> None:
    from eval.__main__ import main
    from eval.dataset import load_set

    source = _manifest(tmp_path / "src")
    for out, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        argv = ["degrade", "--manifest", str(source), "--out", str(tmp_path / out), "--seed", seed]
        assert main([*argv, "--condition", "reverb,noise,phone,quiet"]) == 0
    for condition in ("reverb", "noise", "phone", "quiet"):
        manifest = tmp_path / "a" / condition / "manifest.json"
        eval_set = load_set(manifest)
        assert [item.text for item in eval_set.items] == ["text 0", "text 1"]
        assert (manifest.parent / "lists.json").is_file()
        for item in eval_set.items:
            audio, rate = sf.read(str(item.audio_path))
            assert rate == SAMPLE_RATE_HZ and item.duration_s == pytest.approx(len(audio) / rate, abs=1e-3)
            again = tmp_path / "b" / condition / "wav" / item.audio_path.name
            assert item.audio_path.read_bytes() == again.read_bytes()
    noisy = [(tmp_path / d / "noise" / "wav" / "u0.wav").read_bytes() for d in ("a", "c")]
    assert noisy[0] != noisy[1]  # another seed, other noise
    with pytest.raises(SystemExit, match="condition"):
        main(
            ["degrade", "--manifest", str(source), "--out", str(tmp_path / "x"), "--condition", "underwater"]
        )
