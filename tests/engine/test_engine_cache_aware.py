"""Cache-aware streaming models run on NeMo's cache-aware pipeline: one pipeline per chunk size (encoder
look-ahead 0.56 s = [70, 6], 1.12 s = [70, 13]) over one shared model, switched per step; its greedy and beam
streams share the pipeline's encoder-cache slots (beam: tests/engine/test_engine_cache_aware_beam.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from backend.engine import Engine, EngineConfig, StreamOptions
from tests.engine.conftest import chunks, noise
from tests.engine.test_engine_equivalence import PLANS, outputs, run_batched, run_stream, with_decoding


@pytest_asyncio.fixture
async def cache_aware_engine(cache_aware_model: Path) -> AsyncIterator[Engine]:
    engine = Engine(EngineConfig(model=str(cache_aware_model), biasing_alpha=3.0, max_symbols_per_step=3))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_cache_aware_pipelines_have_exact_chunks(cache_aware_engine: Engine) -> None:
    from nemo.collections.asr.inference.pipelines.cache_aware_rnnt_pipeline import CacheAwareRNNTPipeline

    decoder = cache_aware_engine._loaded_decoder()
    assert decoder.cache_aware and decoder.decodings == ("beam", "greedy")
    for chunk_s, samples, frames, context in [(0.56, 8960, 7, [70, 6]), (1.12, 17920, 14, [70, 13])]:
        chunk_pipeline = decoder.chunk_pipeline(chunk_s, "greedy")
        assert isinstance(chunk_pipeline.pipeline, CacheAwareRNNTPipeline)
        assert (chunk_pipeline.chunk_samples, chunk_pipeline.frames_per_chunk) == (samples, frames)
        assert chunk_pipeline.att_context_size == context
        assert decoder.chunk_pipeline(chunk_s, "beam") is chunk_pipeline  # one set of cache slots
    with pytest.raises(ValueError):
        cache_aware_engine.open_stream(StreamOptions(chunk_s=0.56, decoding="sampling"))  # type: ignore[arg-type]


@pytest.mark.parametrize("decodings", [("greedy",), ("beam",), ("greedy", "beam")])
async def test_cache_aware_batched_equals_alone(
    cache_aware_engine: Engine, decodings: tuple[str, ...]
) -> None:
    """Beam and greedy streams of one chunk size share the pipeline's cache slots and steps."""
    engine = cache_aware_engine
    handles = {
        "a": await engine.load_vocabulary(["recaca", "cahe"]),
        "b": await engine.load_vocabulary(["he re"]),
    }
    plans = with_decoding(PLANS, decodings[0])
    if len(decodings) > 1:
        plans = [*with_decoding(PLANS[::2], "beam"), *PLANS[1::2]]
    batched = await run_batched(engine, plans, handles)
    alone = [await run_stream(engine, plan, handles) for plan in plans]
    for plan, got, want in zip(plans, batched, alone, strict=True):
        assert outputs(got) == outputs(want), plan
    assert any(result.finals for results in alone for result in results)


async def test_cache_aware_abort_frees_slots(cache_aware_engine: Engine) -> None:
    engine = cache_aware_engine
    streams = [
        engine.open_stream(StreamOptions(chunk_s=chunk_s, decoding=decoding))  # type: ignore[arg-type]
        for chunk_s, decoding in [(0.56, "greedy"), (1.12, "beam"), (0.56, "beam")]
    ]
    for stream in streams:
        for chunk in chunks(noise(stream.stream_id, 2.24), stream.chunk_samples)[:2]:
            await stream.push(chunk)
    assert await engine.decoder_stream_count() > 0
    for stream in streams:
        stream.abort()
    assert await engine.decoder_stream_count() == 0
