"""Uploaded recordings to 16 kHz mono PCM with PyAV (FFmpeg's demuxers and decoders): WAV, FLAC, MP3, M4A/AAC,
Ogg/Opus, WebM. Pure I/O on bytes already read (the route caps how many); no event loop here."""

from __future__ import annotations

import io

import av
import numpy as np

SAMPLE_RATE_HZ = 16000
"""What the engine decodes (``backend.engine.types.SAMPLE_RATE_HZ``; not imported: that loads NeMo)."""

__all__ = ["CorruptMedia", "MediaError", "TooLong", "UnsupportedMedia", "decode_audio"]


class MediaError(ValueError):
    """The upload cannot be transcribed; ``status`` is the HTTP status that says why."""

    status = 400


class UnsupportedMedia(MediaError):
    """Not a container or codec with an audio stream we decode (a text file, an image, a video only)."""

    status = 415


class CorruptMedia(MediaError):
    """A known format whose data does not decode (truncated, damaged)."""

    status = 400


class TooLong(MediaError):
    """More audio than ``max_audio_s``."""

    status = 413


def decode_audio(data: bytes, max_audio_s: float) -> np.ndarray:
    """The first audio stream of ``data`` as float32 mono samples at 16 kHz (shape (n,), range -1..1).

    Raises ``UnsupportedMedia`` (no audio stream, unknown format), ``CorruptMedia`` (it does not decode or
    holds no samples) or ``TooLong`` (over ``max_audio_s`` seconds; decoding stops at the limit)."""
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except av.FFmpegError as exc:
        if _known_signature(data):
            raise CorruptMedia(f"the file looks like audio but does not decode: {exc}") from exc
        raise UnsupportedMedia(
            "not an audio file this server decodes (wav, flac, mp3, m4a, ogg, webm)"
        ) from exc
    with container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file holds no audio stream")
        return _read_stream(container, max_audio_s)


SIGNATURES = (b"RIFF", b"fLaC", b"OggS", b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"\x1aE\xdf\xa3")
"""How WAV, FLAC, Ogg, MP3 (tagged, or a bare frame) and WebM/Matroska files begin; M4A has ``ftyp`` at 4."""


def _known_signature(data: bytes) -> bool:
    """Whether ``data`` begins like one of the formats we decode (then a failure means it is damaged)."""
    return data.startswith(SIGNATURES) or data[4:8] == b"ftyp"


def _read_stream(container: av.container.InputContainer, max_audio_s: float) -> np.ndarray:
    stream = container.streams.audio[0]
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE_HZ)
    limit = int(max_audio_s * SAMPLE_RATE_HZ)
    pieces: list[np.ndarray] = []
    total = 0
    try:
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                pieces.append(out.to_ndarray().reshape(-1))
                total += pieces[-1].size
            if total > limit:
                raise TooLong(f"the recording is longer than {max_audio_s:g} s")
        for out in resampler.resample(None):
            pieces.append(out.to_ndarray().reshape(-1))
    except av.FFmpegError as exc:
        raise CorruptMedia(f"the file does not decode: {exc}") from exc
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
    if samples.size == 0:
        raise CorruptMedia("the file holds no audio samples")
    if samples.size > limit:
        raise TooLong(f"the recording is longer than {max_audio_s:g} s")
    return samples.astype(np.float32) / 32768.0
