"""Exact 0.56 s and 1.12 s chunks: frame sizes, decoded frame counts and timestamps (NeMo's own buffered
pipeline silently turns 0.56 s into 0.64 s and 1.12 s into 1.2 s)."""

from __future__ import annotations

from typing import Any

import pytest

from backend.engine import Engine, StreamOptions
from tests.engine.conftest import chunks, noise


class _CountingComputer:
    """Wraps a decoding computer to record how many new encoder frames each call decodes (one stream). A
    resuming RNNT beam call (``decode_chunk``) is also fed frames it decoded before: counted by where the
    call ends in the stream."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.frames: list[list[int]] = []
        self._end = 0

    def __call__(self, x: Any, out_len: Any, *args: Any, **kwargs: Any) -> Any:
        self.frames.append([int(n) for n in out_len])
        return self._inner(x, out_len, *args, **kwargs)

    def decode_chunk(self, x: Any, out_len: Any, state: Any, start: Any, open_rows: Any, offsets: Any) -> Any:
        end = int(offsets[0] + out_len[0])
        self.frames.append([end - self._end])
        self._end = end
        return self._inner.decode_chunk(x, out_len, state, start, open_rows, offsets)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
@pytest.mark.parametrize(("chunk_s", "samples", "frames"), [(0.56, 8960, 7), (1.12, 17920, 14)])
async def test_frames_and_timestamps_exact(
    engine: Engine, chunk_s: float, samples: int, frames: int, decoding: str
) -> None:
    decoder = engine._loaded_decoder()
    chunk_pipeline = decoder.chunk_pipeline(chunk_s, decoding)
    pipeline = chunk_pipeline.pipeline
    assert chunk_pipeline.chunk_samples == samples == engine.chunk_samples(chunk_s)
    assert pipeline.tokens_per_frame == frames
    assert pipeline.chunk_size == chunk_s
    assert pipeline.bufferer.buffer_size_in_secs * 16000 == pytest.approx(samples + 2.0 * 16000 + 0.5)

    owner, attribute = (
        (pipeline, "decoding_computer") if decoding == "greedy" else (decoder._beam.search, "computer")
    )
    counting = _CountingComputer(getattr(owner, attribute))
    setattr(owner, attribute, counting)
    try:
        num_chunks = 6
        stream = engine.open_stream(StreamOptions(chunk_s=chunk_s, decoding=decoding))  # type: ignore[arg-type]
        finals = []
        for chunk in chunks(noise(5, num_chunks * chunk_s), samples):
            result = await stream.push(chunk)
            finals.extend(result.finals)
        last = await stream.finish()
        finals.extend(last.finals)
    finally:
        setattr(owner, attribute, counting._inner)

    assert counting.frames[:num_chunks] == [[frames]] * num_chunks
    assert sum(n for call in counting.frames for n in call) == num_chunks * frames
    assert last.audio_decoded_s == pytest.approx(num_chunks * chunk_s)
    audio_s = num_chunks * chunk_s
    words = [word for final in finals for word in final.words]
    assert words, "the random model should emit words"
    for word in words:
        assert 0.0 <= word.start_s <= word.end_s <= audio_s + 1e-6
        for t in (word.start_s, word.end_s):
            assert t / 0.08 == pytest.approx(round(t / 0.08), abs=1e-6)  # on the 80 ms frame grid
    starts = [w.start_s for w in words]
    assert starts == sorted(starts)
    for final in finals:
        assert final.start_s == final.words[0].start_s and final.end_s == final.words[-1].end_s
