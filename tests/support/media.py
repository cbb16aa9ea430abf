"""Recordings for upload tests: speech as WAV bytes, or encoded by PyAV (MP3, Ogg/Opus, ...)."""

from __future__ import annotations

import io

import av
import numpy as np
import soundfile


def wav_bytes(samples: np.ndarray, rate: int = 16000) -> bytes:
    """16-bit PCM WAV of float32 ``samples``."""
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def encoded(
    samples: np.ndarray,
    container: str = "mp3",
    codec: str = "libmp3lame",
    rate: int = 16000,
    bit_rate: int = 96_000,
) -> bytes:
    """``samples`` (16 kHz mono float32) encoded by FFmpeg through PyAV at ``rate``."""
    out = io.BytesIO()
    with av.open(out, "w", format=container) as muxer:
        stream = muxer.add_stream(codec, rate=rate, layout="mono")
        stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(
            (np.clip(samples, -1, 1) * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = 16000
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        for piece in resampler.resample(frame):
            for packet in stream.encode(piece):
                muxer.mux(packet)
        for packet in stream.encode(None):
            muxer.mux(packet)
    return out.getvalue()
