"""The speech the simulated browsers stream: a WAV synthesised once with espeak-ng (or given), looped.

Audio is 16 kHz mono PCM16 as protocol v1 wants; each client starts at its own chunk-aligned offset so the
streams are not in lock-step.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_RATE_HZ = 16000
PAUSE_S = 1.2  # silence between sentences: long enough for the decoder to end an utterance (a final)
SENTENCES = (
    "Good morning everyone, let's start with the quarterly revenue update from Norvexa Holdings.",
    "The pharmacy team switched three patients from linezolid to tedizolid last week.",
    "Please share the slides about the captioning server roadmap before Thursday.",
    "Brightwater Analytics will join the call at ten thirty to discuss the contract.",
    "We saw forty two new tickets in the support queue and closed thirty nine of them.",
    "The dosage of pravoxetine stays at twenty milligrams once a day.",
)


@dataclass(frozen=True)
class Sentence:
    """What the WAV says between two samples (``start`` inclusive, ``end`` exclusive)."""

    text: str
    start: int
    end: int


def transcript_path(wav: Path) -> Path:
    """Where a WAV's transcript lies: beside it, ``.json`` (``{"sentences": [{"text", "start", "end"}]}``,
    samples at 16 kHz); ``synthesize`` writes one, a ``--wav`` may bring one."""
    return wav.with_suffix(".json")


def load_transcript(wav: Path) -> tuple[Sentence, ...]:
    """The WAV's sentences from its transcript (none without one: then no WER is reported)."""
    path = transcript_path(wav)
    if not path.is_file():
        return ()
    entries = json.loads(path.read_text(encoding="utf-8"))["sentences"]
    return tuple(Sentence(str(e["text"]), int(e["start"]), int(e["end"])) for e in entries)


def synthesize(out_dir: Path, voice: str = "en-us", words_per_minute: int = 160) -> Path:
    """Speak ``SENTENCES`` with espeak-ng, with ``PAUSE_S`` of silence after each; returns a 16 kHz WAV
    (and writes its transcript, ``transcript_path``)."""
    if shutil.which("espeak-ng") is None:
        raise RuntimeError("espeak-ng is not installed: install it or pass --wav")
    out_dir.mkdir(parents=True, exist_ok=True)
    pieces: list[np.ndarray] = []
    spans: list[dict[str, object]] = []
    position = 0
    for index, sentence in enumerate(SENTENCES):
        raw = out_dir / f"sentence-{index}.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-w", str(raw), sentence],
            check=True,
            capture_output=True,
            timeout=60,
        )
        rate, samples = _read_wav(raw)
        pieces.append(_resample(samples, rate))
        spans.append({"text": sentence, "start": position, "end": position + len(pieces[-1])})
        pieces.append(np.zeros(round(PAUSE_S * SAMPLE_RATE_HZ), dtype=np.int16))
        position += len(pieces[-2]) + len(pieces[-1])
    path = out_dir / "speech-16k.wav"
    _write_wav(path, np.concatenate(pieces))
    transcript_path(path).write_text(json.dumps({"sentences": spans}, indent=1) + "\n", encoding="utf-8")
    return path


def speech_ends(samples: np.ndarray, pause_s: float = 0.5, frame_s: float = 0.02) -> list[int]:
    """Where speech stops for at least ``pause_s`` (the reference for "a sentence ended here": the synthesised
    speech pauses ``PAUSE_S`` after each sentence; a recording pauses between its sentences), as the sample
    after the last loud frame. Loud: RMS within 35 dB of the WAV's loudest frame."""
    frame = round(frame_s * SAMPLE_RATE_HZ)
    count = len(samples) // frame
    if count == 0:
        return []
    frames = samples[: count * frame].astype(np.float64).reshape(count, frame)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    loud = rms > rms.max() * 10 ** (-35 / 20)
    need = round(pause_s / frame_s)
    ends, quiet = [], 0
    for index in range(count + need):  # the WAV loops: its end is followed by its start
        if loud[index % count]:
            quiet = 0
            continue
        quiet += 1
        if quiet == need and loud[(index - need) % count]:
            ends.append(((index - need + 1) % count) * frame)
    return sorted(set(ends))


def load_pcm16(path: Path) -> np.ndarray:
    """The samples of a 16 kHz mono PCM16 WAV (other rates are resampled; other formats are an error)."""
    rate, samples = _read_wav(path)
    return _resample(samples, rate)


def _read_wav(path: Path) -> tuple[int, np.ndarray]:
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16-bit PCM, got {8 * wav.getsampwidth()}-bit")
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        channels, rate = wav.getnchannels(), wav.getframerate()
    if channels > 1:
        frames = frames.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return rate, frames


def _resample(samples: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE_HZ:
        return samples.astype(np.int16)
    from math import gcd

    from scipy.signal import resample_poly

    common = gcd(rate, SAMPLE_RATE_HZ)
    out = resample_poly(samples.astype(np.float32), SAMPLE_RATE_HZ // common, rate // common)
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def _write_wav(path: Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE_HZ)
        wav.writeframes(samples.astype("<i2").tobytes())


class AudioLoop:
    """The WAV repeated forever, cut into chunks of ``chunk_samples``: ``chunk(k)`` is the k-th (from 0)."""

    def __init__(self, samples: np.ndarray, chunk_samples: int, sentences: tuple[Sentence, ...] = ()) -> None:
        if len(samples) < chunk_samples:
            raise ValueError("the WAV is shorter than one chunk")
        self.sentences = sentences  # what the WAV says (empty: not known)
        repeats = -(-chunk_samples * 2 // len(samples)) + 1
        self._samples = np.tile(samples.astype("<i2"), repeats)
        self._length = len(samples)
        self.chunk_samples = chunk_samples
        self.sentence_ends = speech_ends(samples)  # samples into the WAV

    def sentence_ends_s(self, first: int, after_s: float, until_s: float) -> list[float]:
        """Where sentences end (``speech_ends``) in a stream that starts at sample ``first`` of the WAV and
        loops it, in stream seconds within ``(after_s, until_s]``."""
        ends = []
        for end in self.sentence_ends:
            offset = (end - first) % self._length  # the first time this end comes in the stream
            k = max(0, int((after_s * SAMPLE_RATE_HZ - offset) // self._length))
            while (t := (offset + k * self._length) / SAMPLE_RATE_HZ) <= until_s:
                if t > after_s:
                    ends.append(t)
                k += 1
        return sorted(ends)

    def sentences_within(self, first: int, until_s: float) -> list[tuple[float, float, str]]:
        """The sentences a stream that starts at sample ``first`` of the WAV and loops it says whole within
        its first ``until_s`` seconds: (start s, end s, text), in order."""
        found = []
        for sentence in self.sentences:
            start = (sentence.start - first) % self._length  # one cut by the stream's start: the next loop
            while (end := start + sentence.end - sentence.start) <= until_s * SAMPLE_RATE_HZ:
                found.append((start / SAMPLE_RATE_HZ, end / SAMPLE_RATE_HZ, sentence.text))
                start += self._length
        return sorted(found)

    @property
    def chunks_per_loop(self) -> int:
        """Chunks in one pass over the WAV (rounded up)."""
        return -(-self._length // self.chunk_samples)

    def chunk(self, k: int) -> bytes:
        """PCM16 little-endian bytes of chunk ``k``, wrapping around the end of the WAV."""
        return self.samples(k * self.chunk_samples)

    def samples(self, first: int) -> bytes:
        """PCM16 little-endian bytes of one chunk from sample ``first`` on, wrapping around the end."""
        start = first % self._length
        return self._samples[start : start + self.chunk_samples].tobytes()
