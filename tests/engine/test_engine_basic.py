"""Engine basics: start, chunk sizes, push/finish, abort, input validation."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from backend.engine import Engine, EngineError, StreamOptions, StreamStatus
from tests.engine.conftest import chunks, noise


async def test_ready_and_chunk_samples(engine: Engine) -> None:
    assert engine.ready
    assert engine.chunk_samples(0.56) == 8960
    assert engine.chunk_samples(1.12) == 17920
    with pytest.raises(ValueError):
        engine.chunk_samples(0.64)
    assert engine.chunk_samples(0.8 * 0.7) == 8960  # 0.5599999999999999 is the allowed 0.56
    stream = engine.open_stream(StreamOptions(chunk_s=0.8 * 0.7))
    assert stream.options.chunk_s == 0.56
    await stream.push(noise(1, 0.56))
    await stream.finish()


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
async def test_push_and_finish_commit_last_partial(engine: Engine, decoding: str) -> None:
    stream = engine.open_stream(StreamOptions(chunk_s=0.56, decoding=decoding))  # type: ignore[arg-type]
    partial = ""
    for chunk in chunks(noise(1, 3.0), 8960):
        result = await stream.push(chunk)
        partial = result.partial
    assert result.audio_decoded_s == pytest.approx(5 * 0.56)
    last = await stream.finish()
    assert stream.status is StreamStatus.FINISHED
    assert last.partial == ""
    committed = " ".join(f.text for f in last.finals)
    if partial:
        assert committed.endswith(partial) or partial in committed
    assert await engine.decoder_stream_count() == 0


async def test_pcm16_bytes_equal_float(engine: Engine) -> None:
    audio = noise(2, 2.24)
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
    a = engine.open_stream(StreamOptions(chunk_s=1.12))
    b = engine.open_stream(StreamOptions(chunk_s=1.12))
    for chunk in chunks(pcm, 17920):
        ra = await a.push(chunk.tobytes())
        rb = await b.push(chunk.astype(np.float32) / 32768.0)
        assert ra.partial == rb.partial
    a.abort()
    b.abort()


async def test_wrong_sizes_rejected(engine: Engine) -> None:
    stream = engine.open_stream(StreamOptions(chunk_s=0.56))
    with pytest.raises(ValueError):
        await stream.push(np.zeros(8961, dtype=np.float32))
    with pytest.raises(ValueError):
        await stream.push(b"\x00" * 100)
    with pytest.raises(ValueError):
        engine.open_stream(StreamOptions(chunk_s=0.64))
    stream.abort()


async def test_second_concurrent_push_raises(engine: Engine) -> None:
    stream = engine.open_stream(StreamOptions(chunk_s=0.56))
    first = asyncio.create_task(stream.push(np.zeros(8960, dtype=np.float32)))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await stream.push(np.zeros(8960, dtype=np.float32))
    await first
    await stream.finish()
    with pytest.raises(EngineError):
        await stream.push(np.zeros(8960, dtype=np.float32))


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
async def test_abort_frees_everything(engine: Engine, decoding: str) -> None:
    handle = await engine.load_vocabulary(["linezolid", "husqvarna"])
    options = StreamOptions(chunk_s=0.56, decoding=decoding, vocabulary=handle)  # type: ignore[arg-type]
    streams = [engine.open_stream(options) for _ in range(3)]
    await asyncio.gather(*(s.push(noise(i, 0.56)) for i, s in enumerate(streams)))
    pending = asyncio.create_task(streams[0].push(noise(9, 0.56)))
    await asyncio.sleep(0)
    for stream in streams:
        stream.abort()
        stream.abort()
    with pytest.raises(asyncio.CancelledError):
        await pending
    handle.release()
    assert engine.stats().live_streams == 0
    assert await engine.decoder_stream_count() == 0
    assert engine.stats().registered_vocabularies == 0
    assert engine._biasing_registry().stats().active_leases == 0
    with pytest.raises(EngineError):
        _ = handle.model_id
