"""Degraded copies of an evaluation manifest: the rooms, lines and levels captions meet (issue 45).

``python -m eval degrade --manifest M --out DIR --condition all --seed 0`` writes, per condition,
``DIR/<condition>/manifest.json`` (a NeMo manifest: the source's lines with ``audio_filepath`` pointing to
``wav/<utt_id>.wav`` beside it and ``condition`` added; the same ``text``) and 16 kHz mono PCM16 WAVs; a
``lists.json`` next to the source manifest is copied, so ``eval run`` takes a degraded copy as it takes the
source. Deterministic for a seed: each utterance's random draws come from (seed, condition, utt_id).

Conditions (all simulated offline; nothing here was recorded in a room):

- ``clean``: the source audio at 16 kHz (the reference row).
- ``reverb``: a mid-size room, a pyroomacoustics image-source shoebox of 6 x 5 x 3 m with an RT60 of 0.5 s
  (absorption from Sabine's formula), talker and microphone 2-3 m apart; same peak as the source.
- ``noise``: fan and office noise at 20 dB SNR: brown and pink noise, a 50 Hz mains hum with harmonics and
  a slowly swelling band-passed whoosh; the SNR is measured over the speech's active frames.
- ``phone``: a telephone line: 300-3400 Hz band-pass, 8 kHz, 8-bit mu-law, back to 16 kHz.
- ``babble``: three other talkers underneath at 10 dB SNR (espeak-ng voices saying ``BABBLE_SENTENCES``).
- ``quiet``: scaled so the peak is -38 dBFS (a far or soft microphone; RMS is then about -55 dBFS).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import butter, fftconvolve, resample_poly, sosfilt

SAMPLE_RATE_HZ = 16000
CONDITIONS = ("clean", "reverb", "noise", "phone", "babble", "quiet")
ROOM_M = (6.0, 5.0, 3.0)
RT60_S = 0.5
NOISE_SNR_DB = 20.0
BABBLE_SNR_DB = 10.0
BABBLE_TALKERS = 3
QUIET_PEAK_DBFS = -38.0
PHONE_BAND_HZ = (300.0, 3400.0)
FRAME_S = 0.02
ACTIVE_BELOW_LOUDEST_DB = 35.0  # a frame is speech when its RMS is within this of the loudest frame's
BABBLE_VOICES = ("en-us+m3", "en-gb+f2", "en-us+f4", "en-gb-scotland+m1", "en-029+m2", "en-us-nyc+f1")
BABBLE_SENTENCES = (
    "The committee will meet again after the holidays to review the budget.",
    "Could you send me the notes from yesterday before lunch?",
    "We moved the servers to the new building over the weekend.",
    "I think the second option is cheaper but it takes longer to build.",
    "Somebody left a blue umbrella in the meeting room on the third floor.",
    "The train was late again so I missed the first half of the talk.",
    "Let us come back to that question once the figures are in.",
    "Her team finished the survey two weeks ahead of the schedule.",
    "The coffee machine on this floor has been broken since Monday.",
    "Please remember to lock the side door when you leave tonight.",
    "They are hiring two more engineers for the support group.",
    "My sister lives near the harbour and walks to work every day.",
)


def rng_for(seed: int, condition: str, utt_id: str) -> np.random.Generator:
    """The random draws of one utterance under one condition: independent of the manifest's order."""
    return np.random.default_rng([seed, zlib.crc32(condition.encode()), zlib.crc32(utt_id.encode())])


def active_frames(speech: np.ndarray, frame_s: float = FRAME_S) -> np.ndarray:
    """Per ``frame_s`` frame of ``speech``: its RMS is within ``ACTIVE_BELOW_LOUDEST_DB`` of the loudest."""
    frame = round(frame_s * SAMPLE_RATE_HZ)
    count = max(1, len(speech) // frame)
    frames = np.resize(speech.astype(np.float64), count * frame).reshape(count, frame)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return rms > rms.max() * 10 ** (-ACTIVE_BELOW_LOUDEST_DB / 20)


def active_power(signal: np.ndarray, active: np.ndarray, frame_s: float = FRAME_S) -> float:
    """Mean power of ``signal`` over the frames ``active`` marks."""
    frame = round(frame_s * SAMPLE_RATE_HZ)
    frames = np.resize(signal.astype(np.float64), len(active) * frame).reshape(len(active), frame)
    return float(np.mean(frames[active] ** 2))


def snr_db(speech: np.ndarray, noise: np.ndarray) -> float:
    """SNR of ``speech`` over ``noise`` on the speech's active frames, dB."""
    active = active_frames(speech)
    return 10 * np.log10(active_power(speech, active) / active_power(noise, active))


def mix_at_snr(speech: np.ndarray, noise: np.ndarray, target_db: float) -> np.ndarray:
    """``speech`` plus ``noise`` scaled to ``target_db`` (``snr_db``); both scaled down together if the sum
    would clip, which keeps the SNR."""
    noise = noise[: len(speech)]
    scaled = noise * 10 ** ((snr_db(speech, noise) - target_db) / 20)
    mixed = speech + scaled
    peak = float(np.abs(mixed).max())
    return (mixed / peak * 0.99 if peak > 0.99 else mixed).astype(np.float32)


def coloured_noise(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Noise with power falling as 1/f**exponent (1 pink, 2 brown), unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / SAMPLE_RATE_HZ)
    spectrum[1:] /= freqs[1:] ** (exponent / 2)
    spectrum[0] = 0
    out = np.fft.irfft(spectrum, n)
    return out / (np.sqrt(np.mean(out**2)) or 1.0)


def fan_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Fan and office noise: brown + pink noise, a 50 Hz hum with harmonics, a swelling 200-2000 Hz whoosh."""
    t = np.arange(n) / SAMPLE_RATE_HZ
    hum = sum(
        a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        for f, a in ((50, 1), (100, 0.5), (150, 0.25))
    )
    whoosh = sosfilt(
        butter(4, (200, 2000), "bandpass", fs=SAMPLE_RATE_HZ, output="sos"), rng.standard_normal(n)
    )
    whoosh *= 1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.2, 0.5) * t)
    whoosh /= np.sqrt(np.mean(whoosh**2)) or 1.0
    return 1.0 * coloured_noise(rng, n, 2) + 0.6 * coloured_noise(rng, n, 1) + 0.3 * hum + 0.5 * whoosh


def room_impulse_response(
    rng: np.random.Generator,
    room_m: tuple[float, float, float] = ROOM_M,
    rt60_s: float = RT60_S,
    distance_m: tuple[float, float] = (2.0, 3.0),
) -> np.ndarray:
    """A ``room_m`` shoebox with an ``rt60_s`` reverberation time (pyroomacoustics image sources, Sabine's
    absorption), talker and microphone drawn ``distance_m`` apart (at most what the room allows); the direct
    sound at sample 0, peak 1."""
    import pyroomacoustics as pra

    absorption, max_order = pra.inverse_sabine(rt60_s, room_m)
    room = pra.ShoeBox(room_m, fs=SAMPLE_RATE_HZ, materials=pra.Material(absorption), max_order=max_order)
    length, width, _ = room_m
    # the mic off-centre (1.5-2.5 m, 1.5-3.5 m in the 6 x 5 m default room)
    mic = np.array(
        [
            rng.uniform(max(0.3, length / 2 - 1.5), length / 2 - 0.5),
            rng.uniform(width / 2 - 1, width / 2 + 1),
            1.2,
        ]
    )
    low, high = distance_m
    for attempt in range(1000):
        talker = np.array([rng.uniform(0.5, length - 0.5), rng.uniform(0.5, width - 0.5), 1.6])
        if low <= np.linalg.norm(talker - mic) <= high or attempt == 999:
            break
    room.add_source(talker.tolist())
    room.add_microphone(mic.tolist())
    room.compute_rir()
    rir = np.asarray(room.rir[0][0], dtype=np.float64)
    rir = rir[int(np.argmax(np.abs(rir))) :]
    return rir / np.abs(rir).max()


def in_room(audio: np.ndarray, rir: np.ndarray, tail: int) -> np.ndarray:
    """``audio`` convolved with the impulse response ``rir``, ``tail`` samples of reverberation kept after
    it, at the same peak."""
    wet = fftconvolve(audio, rir)[: len(audio) + tail]
    return (wet * (np.abs(audio).max() / (np.abs(wet).max() or 1.0))).astype(np.float32)


def reverb(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``audio`` in the room of ``room_impulse_response``, with its tail (up to RT60), at the same peak."""
    return in_room(audio, room_impulse_response(rng), round(RT60_S * SAMPLE_RATE_HZ))


def mu_law(audio: np.ndarray, mu: int = 255) -> np.ndarray:
    """G.711-style 8-bit mu-law round trip: companded, quantised to 256 levels, expanded."""
    x = np.clip(audio, -1.0, 1.0)
    companded = np.sign(x) * np.log1p(mu * np.abs(x)) / np.log1p(mu)
    code = np.round((companded + 1) / 2 * mu)  # 0..255
    y = code / mu * 2 - 1
    return np.sign(y) * ((1 + mu) ** np.abs(y) - 1) / mu


def phone(
    audio: np.ndarray, rng: np.random.Generator, band_hz: tuple[float, float] = PHONE_BAND_HZ
) -> np.ndarray:
    """A telephone line: ``band_hz`` band-pass, 8 kHz, 8-bit mu-law, back to 16 kHz."""
    band = sosfilt(butter(8, band_hz, "bandpass", fs=SAMPLE_RATE_HZ, output="sos"), audio)
    line = mu_law(resample_poly(band, 1, 2))
    return resample_poly(line, 2, 1)[: len(audio)].astype(np.float32)


def noise(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``audio`` with ``fan_noise`` at ``NOISE_SNR_DB``."""
    return mix_at_snr(audio, fan_noise(rng, len(audio)), NOISE_SNR_DB)


def quiet(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``audio`` scaled to a ``QUIET_PEAK_DBFS`` peak."""
    return (audio * (10 ** (QUIET_PEAK_DBFS / 20) / (np.abs(audio).max() or 1.0))).astype(np.float32)


def speak_espeak(text: str, voice: str) -> np.ndarray:
    """``text`` spoken by espeak-ng ``voice``, 16 kHz float32 (RuntimeError without espeak-ng)."""
    from eval.dataset import read_16k

    if shutil.which("espeak-ng") is None:
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng): the babble needs it")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "talker.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-w", str(wav), text], check=True, capture_output=True, timeout=60
        )  # noqa: S603, S607
        return read_16k(wav)


class Babble:
    """Three other talkers at ``BABBLE_SNR_DB``: each talker is an espeak-ng voice reading sentences of
    ``BABBLE_SENTENCES`` back to back from a random point; renders are made once and cached."""

    def __init__(self, speak: Callable[[str, str], np.ndarray] = speak_espeak) -> None:
        self._speak = speak
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def _talker(self, rng: np.random.Generator, voice: str, n: int) -> np.ndarray:
        pieces, length = [], 0
        order = rng.permutation(len(BABBLE_SENTENCES))
        k = 0
        while length < n + SAMPLE_RATE_HZ:
            key = (voice, BABBLE_SENTENCES[order[k % len(order)]])
            if key not in self._cache:
                self._cache[key] = self._speak(key[1], voice)
            pieces.append(self._cache[key])
            length += len(pieces[-1])
            k += 1
        track = np.concatenate(pieces)
        start = int(rng.integers(0, len(track) - n))
        track = track[start : start + n].astype(np.float64)
        return track / (np.sqrt(np.mean(track**2)) or 1.0)

    def __call__(self, audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        voices = rng.choice(len(BABBLE_VOICES), BABBLE_TALKERS, replace=False)
        talkers = sum(self._talker(rng, BABBLE_VOICES[v], len(audio)) for v in voices)
        return mix_at_snr(audio, np.asarray(talkers), BABBLE_SNR_DB)


def degraders() -> dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]]:
    """Condition name -> function of (16 kHz float32 audio, generator) -> degraded 16 kHz float32 audio."""
    return {
        "clean": lambda audio, _: audio.astype(np.float32),
        "reverb": reverb,
        "noise": noise,
        "phone": phone,
        "babble": Babble(),
        "quiet": quiet,
    }


def read_manifest(manifest: Path) -> list[dict[str, Any]]:
    """The manifest's lines, each with ``audio_filepath`` made absolute."""
    entries = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            audio = Path(entry["audio_filepath"])
            entry["audio_filepath"] = str(audio if audio.is_absolute() else manifest.parent / audio)
            entries.append(entry)
    return entries


def write_condition(
    entries: Sequence[dict[str, Any]], source: Path, out: Path, condition: str, seed: int
) -> Path:
    """Degrade every entry's audio under ``condition`` into ``out/condition``; returns its manifest."""
    import soundfile as sf

    from eval.dataset import read_16k

    degrade = degraders()[condition]
    folder = out / condition
    (folder / "wav").mkdir(parents=True, exist_ok=True)
    lines = []
    for entry in entries:
        utt_id = entry.get("utt_id") or Path(entry["audio_filepath"]).stem
        audio = degrade(read_16k(Path(entry["audio_filepath"])), rng_for(seed, condition, utt_id))
        rel = f"wav/{utt_id}.wav"
        sf.write(str(folder / rel), np.clip(audio, -1.0, 1.0), SAMPLE_RATE_HZ, subtype="PCM_16")
        line = {**entry, "audio_filepath": rel, "duration": round(len(audio) / SAMPLE_RATE_HZ, 3)}
        lines.append(json.dumps({**line, "utt_id": utt_id, "condition": condition, "degrade_seed": seed}))
    manifest = folder / "manifest.json"
    manifest.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if (source.parent / "lists.json").is_file():
        shutil.copyfile(source.parent / "lists.json", folder / "lists.json")
    return manifest


def degrade(args: argparse.Namespace) -> int:
    """The ``degrade`` command."""
    from tqdm import tqdm

    names = CONDITIONS if args.condition == "all" else tuple(c for c in args.condition.split(",") if c)
    unknown = set(names) - set(CONDITIONS)
    if unknown:
        raise SystemExit(f"--condition must be among {CONDITIONS} or all, got {sorted(unknown)}")
    entries = read_manifest(args.manifest)
    for condition in tqdm(names, desc="degrading", unit="condition"):
        manifest = write_condition(entries, args.manifest, args.out, condition, args.seed)
        print(f"{manifest}: {len(entries)} utterances, {condition}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``degrade`` to the ``eval`` subcommands."""
    p = sub.add_parser("degrade", help="degraded copies of a manifest: reverb, noise, phone, babble, quiet")
    p.add_argument("--manifest", type=Path, required=True, help="source NeMo manifest")
    p.add_argument("--out", type=Path, required=True, help="one folder per condition is written here")
    p.add_argument(
        "--condition", default="all", help=f"comma-separated among {', '.join(CONDITIONS)}; or all"
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=degrade)
