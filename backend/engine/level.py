"""A stream's input level: speech judged against the stream's own noise floor, a slow gain for quiet
speech, and whether the speaker's microphone is too quiet or clipping.

Chunks are measured in 20 ms frames (RMS, dBFS). The stream's *floor* is the quiet end of what it sends
(the 10th percentile of a chunk's frames that are not zeros; it falls at once and rises only slowly). A frame
is *active* when it stands ``ACTIVE_ABOVE_FLOOR_DB`` over the floor and over an absolute minimum
(``min_dbfs``, below which nothing is speech); a chunk holds speech when it has a few active frames and its
frames vary as speech does. Stationary noise (a fan, a hiss) and digital silence hold none. The *speech
level* is the mean power of active frames, smoothed over a few seconds. The *gain* raises speech quieter than
``GAIN_BELOW_DBFS`` towards ``TARGET_DBFS`` (never lowers it; at most ``max_gain_db``); set at the first
speech, it then moves at most ``GAIN_SLEW_DB_PER_S`` and is held in chunks without speech, so the noise of
pauses is not pumped up. A stream's leading-silence gate opens on speech, or on a chunk loud enough that it
was always decoded (``OPENS_GATE_DBFS``).
"""

from __future__ import annotations

import math

import numpy as np

from backend.engine.types import SAMPLE_RATE_HZ, InputLevel, LevelState

FRAME_SAMPLES = SAMPLE_RATE_HZ // 50  # 20 ms
ACTIVE_ABOVE_FLOOR_DB = 12.0
MIN_ACTIVE_FRAMES = 3  # 60 ms of speech in a chunk
SPEECH_CONTRAST_DB = 6.0  # loudest against quietest non-zero frames of a chunk with speech
ONSET_FRAMES = 8  # fewer non-zero frames than this after zeros: speech starting at the chunk's end
DIGITAL_SILENCE_DBFS = -100.0  # the floor of zeros (padding, a muted input)
FLOOR_RISE_DB_PER_S = 6.0  # after digital silence, a fan is the floor again within ~8 s
SPEECH_LEVEL_TIME_S = 3.0
TARGET_DBFS = -26.0  # active-frame level of the recordings the bundled model reads well
GAIN_BELOW_DBFS = -36.0  # speech louder than this is left as it is
GAIN_SLEW_DB_PER_S = 6.0
QUIET_BELOW_DBFS = -42.0  # active-frame level; a close microphone at a normal gain gives -20 to -30
QUIET_CLEAR_DBFS = -39.0
CLIP_AT = 0.98
CLIPPED_FRACTION = 0.002
REPORT_AFTER_S = 2.0
OPENS_GATE_DBFS = -45.0  # a chunk this loud (RMS) is decoded whatever its shape: the absolute gate of old


def _db(power: float) -> float:
    return 10.0 * math.log10(power + 1e-12)


class LevelMeter:
    """One stream's meter and gain. ``process`` each chunk in order; it returns the chunk with the gain
    applied. ``max_gain_db`` 0 leaves the audio as it is (the meter still reports)."""

    def __init__(self, chunk_s: float, *, min_dbfs: float = -70.0, max_gain_db: float = 30.0) -> None:
        self.chunk_s = chunk_s
        self.min_dbfs = min_dbfs
        self.max_gain_db = max_gain_db
        self.floor_dbfs: float | None = None
        self.speech_dbfs: float | None = None
        self.gain_db = 0.0
        self.active = False  # whether the last chunk held speech
        self.audible = False  # whether it held speech or was loud enough to decode anyway (OPENS_GATE_DBFS)
        self.state: LevelState = "ok"
        self._quiet_s = 0.0
        self._loud_s = 0.0
        self._peak_dbfs = -120.0
        self._gain_set = False

    def measure(self, samples: np.ndarray) -> bool:
        """Update the floor, the speech level and the state from one chunk; whether it holds speech."""
        n = len(samples) // FRAME_SAMPLES * FRAME_SAMPLES
        frames = np.asarray(samples[:n], dtype=np.float64).reshape(-1, FRAME_SAMPLES)
        power = np.mean(np.square(frames), axis=1) if n else np.zeros(1)
        frames_db = 10.0 * np.log10(power + 1e-12)
        signal = frames_db[frames_db > DIGITAL_SILENCE_DBFS + 1.0]
        # Zeros (a dropout, padding) say nothing of the room's noise unless the chunk is (nearly) all zeros.
        quiet_end = float(np.percentile(signal if signal.size >= ONSET_FRAMES else frames_db, 10))
        quiet_end = max(quiet_end, DIGITAL_SILENCE_DBFS)
        if self.floor_dbfs is None:
            self.floor_dbfs = quiet_end
        else:
            self.floor_dbfs = min(quiet_end, self.floor_dbfs + FLOOR_RISE_DB_PER_S * self.chunk_s)
        peak = float(np.max(np.abs(samples))) if len(samples) else 0.0
        self._peak_dbfs = 20.0 * math.log10(peak + 1e-9)
        active = frames_db >= max(self.floor_dbfs + ACTIVE_ABOVE_FLOOR_DB, self.min_dbfs)
        self.active = int(active.sum()) >= MIN_ACTIVE_FRAMES and self._varies(signal)
        self.audible = self.active or _db(float(power.mean())) >= OPENS_GATE_DBFS
        if self.active:
            level = _db(float(power[active].mean()))
            if self.speech_dbfs is None:
                self.speech_dbfs = level
            else:
                self.speech_dbfs += (level - self.speech_dbfs) * min(1.0, self.chunk_s / SPEECH_LEVEL_TIME_S)
            clipped = float(np.mean(np.abs(samples) >= CLIP_AT)) >= CLIPPED_FRACTION
            self._update_state(level, clipped)
        return self.active

    @staticmethod
    def _varies(signal: np.ndarray) -> bool:
        """Speech comes and goes: ``signal``, the chunk's frames that are not zeros, varies; a few frames
        after zeros are the onset of speech at the chunk's end, too short to vary."""
        if signal.size == 0:
            return False
        contrast = float(signal.max() - np.percentile(signal, 10))
        return signal.size < ONSET_FRAMES or contrast >= SPEECH_CONTRAST_DB

    def _update_state(self, level: float, clipped: bool) -> None:
        self._loud_s = self._loud_s + self.chunk_s if clipped else 0.0
        if level < QUIET_BELOW_DBFS:
            self._quiet_s += self.chunk_s
        elif level >= QUIET_CLEAR_DBFS:
            self._quiet_s = 0.0
        if self._loud_s >= REPORT_AFTER_S - 1e-9:
            self.state = "loud"
        elif self._quiet_s >= REPORT_AFTER_S - 1e-9:
            self.state = "quiet"
        elif not clipped and self._quiet_s == 0.0:
            self.state = "ok"

    def process(self, samples: np.ndarray) -> np.ndarray:
        """Measure the chunk, move the gain (only on speech) and return the chunk with the gain applied,
        ramped from the last chunk's gain so that it never steps within a chunk."""
        before = self.gain_db
        if self.measure(samples) and self.speech_dbfs is not None and self.max_gain_db > 0:
            quiet = self.speech_dbfs < GAIN_BELOW_DBFS
            wanted = min(TARGET_DBFS - self.speech_dbfs, self.max_gain_db) if quiet else 0.0
            if not self._gain_set and quiet:  # the first speech sets it at once: the first words count too
                self.gain_db = before = wanted
                self._gain_set = True
            else:
                step = GAIN_SLEW_DB_PER_S * self.chunk_s
                self.gain_db += min(max(wanted - self.gain_db, -step), step)
        if before == 0.0 and self.gain_db == 0.0:
            return samples
        start, end = 10.0 ** (before / 20.0), 10.0 ** (self.gain_db / 20.0)
        ramp = np.linspace(start, end, len(samples), dtype=np.float32)
        return np.clip(samples * ramp, -1.0, 1.0).astype(np.float32)

    def report(self) -> InputLevel:
        """The meter's reading after the last chunk."""
        speech = None if self.speech_dbfs is None else round(self.speech_dbfs, 1)
        return InputLevel(self.state, speech, round(self._peak_dbfs, 1), round(self.gain_db, 1))
