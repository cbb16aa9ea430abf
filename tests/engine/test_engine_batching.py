"""The batcher: really waits up to max_wait_ms, caps max_batch_streams, leaves idle streams out of steps,
and a failed step fails the engine loudly (futures fail, not ready) instead of hanging."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from backend.engine import Engine, EngineConfig, EngineError, EngineOverloaded, StreamOptions
from tests.engine.conftest import noise


@pytest_asyncio.fixture
async def slow_batching_engine(rnnt_model: Path) -> AsyncIterator[Engine]:
    config = EngineConfig(model=str(rnnt_model), max_wait_ms=300.0, max_batch_streams=3, max_live_streams=6)
    engine = Engine(config)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


class _StepSpy:
    """Records the stream ids of every decode step."""

    def __init__(self, engine: Engine) -> None:
        self.steps: list[list[int]] = []
        decoder = engine._loaded_decoder()
        inner = decoder.step_first  # what the engine's decode thread runs (the second pass runs beside it)

        def step(items, *args):  # type: ignore[no-untyped-def]
            self.steps.append([item.stream_id for item in items])
            return inner(items, *args)

        decoder.step_first = step  # type: ignore[method-assign]


async def test_really_waits_for_other_live_streams(slow_batching_engine: Engine) -> None:
    engine = slow_batching_engine
    spy = _StepSpy(engine)
    a = engine.open_stream(StreamOptions(chunk_s=0.56))
    b = engine.open_stream(StreamOptions(chunk_s=0.56))
    first = asyncio.create_task(a.push(noise(1, 0.56)))
    await asyncio.sleep(0.1)  # well inside max_wait_ms
    await asyncio.gather(first, b.push(noise(2, 0.56)))
    assert spy.steps == [[a.stream_id, b.stream_id]]


async def test_a_busy_decoder_holds_a_step_for_streams_sending_at_other_phases(rnnt_model: Path) -> None:
    """Issue 37: while the decode thread is busy, the batcher waits up to ``max_hold_ms`` (not
    ``max_wait_ms``) for the other live streams, so streams whose chunks arrive 0.2 s apart share a step."""
    config = EngineConfig(model=str(rnnt_model), max_wait_ms=20.0, max_hold_ms=600.0, hold_when_busy=0.5)
    engine = Engine(config)
    await engine.start()
    try:
        spy = _StepSpy(engine)
        a = engine.open_stream(StreamOptions(chunk_s=0.56))
        b = engine.open_stream(StreamOptions(chunk_s=0.56))

        async def staggered() -> None:
            first = asyncio.create_task(a.push(noise(1, 0.56)))
            await asyncio.sleep(0.2)
            await asyncio.gather(first, b.push(noise(2, 0.56)))

        await staggered()  # not busy: a's chunk goes alone after 20 ms
        assert spy.steps == [[a.stream_id], [b.stream_id]]
        now = time.monotonic()
        engine._recent_steps.append((now - 2.5, now))  # the decode thread was busy 2.5 s of the last 3
        assert engine.busy_fraction() > 0.8
        await staggered()
        assert spy.steps[2:] == [[a.stream_id, b.stream_id]]
    finally:
        await engine.stop()


async def test_idle_streams_never_enter_a_step(slow_batching_engine: Engine) -> None:
    engine = slow_batching_engine
    spy = _StepSpy(engine)
    active = engine.open_stream(StreamOptions(chunk_s=0.56))
    idle = [engine.open_stream(StreamOptions(chunk_s=0.56)) for _ in range(2)]
    started = time.monotonic()
    await active.push(noise(1, 0.56))
    waited = time.monotonic() - started
    assert spy.steps == [[active.stream_id]]
    assert waited >= 0.3  # it waited max_wait_ms for the idle streams, then went without them
    for stream in idle:
        stream.abort()
    started = time.monotonic()
    await active.push(noise(2, 0.56))
    assert time.monotonic() - started < 0.3  # alone now: no waiting
    assert spy.steps[-1] == [active.stream_id]


async def test_max_batch_streams_cap(slow_batching_engine: Engine) -> None:
    engine = slow_batching_engine
    spy = _StepSpy(engine)
    streams = [engine.open_stream(StreamOptions(chunk_s=0.56)) for _ in range(5)]
    await asyncio.gather(*(s.push(noise(i, 0.56)) for i, s in enumerate(streams)))
    assert sorted(len(step) for step in spy.steps) == [2, 3]
    assert sorted(i for step in spy.steps for i in step) == [s.stream_id for s in streams]
    assert engine.stats().max_batch_streams_seen == 3


async def test_live_stream_cap(slow_batching_engine: Engine) -> None:
    engine = slow_batching_engine
    streams = [engine.open_stream(StreamOptions(chunk_s=0.56)) for _ in range(6)]
    with pytest.raises(EngineOverloaded):
        engine.open_stream(StreamOptions(chunk_s=0.56))
    streams[0].abort()
    engine.open_stream(StreamOptions(chunk_s=0.56)).abort()


async def test_fault_in_a_step_fails_futures_and_readiness(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = [engine.open_stream(StreamOptions(chunk_s=0.56)) for _ in range(3)]
    await asyncio.gather(*(s.push(noise(i, 0.56)) for i, s in enumerate(streams)))

    def failing_step(items: object) -> None:  # runs on the decode thread, as a NeMo failure would
        raise RuntimeError("injected")

    monkeypatch.setattr(engine, "_decode_step", failing_step)
    results = await asyncio.gather(
        *(s.push(noise(i, 0.56)) for i, s in enumerate(streams)), return_exceptions=True
    )
    assert all(isinstance(r, EngineError) for r in results)
    assert isinstance(results[0].__cause__, RuntimeError)
    assert not engine.ready
    assert not engine.stats().ready
    with pytest.raises(EngineError):
        engine.open_stream(StreamOptions(chunk_s=0.56))
    with pytest.raises(EngineError):
        await streams[0].push(noise(1, 0.56))


async def test_slow_steps_show_as_lag(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    decode_step = engine._decode_step

    def slow_step(items: list) -> list:  # a slower machine: 0.3 s more per step on the decode thread
        time.sleep(0.3)
        return decode_step(items)

    monkeypatch.setattr(engine, "_decode_step", slow_step)
    stream = engine.open_stream(StreamOptions(chunk_s=0.56))
    pending = asyncio.create_task(stream.push(noise(1, 0.56)))
    await asyncio.sleep(0.1)
    assert engine.stats().max_lag_s == pytest.approx(0.56)
    await pending
    assert engine.stats().max_lag_s == 0.0
    assert engine.stats().last_step_ms >= 300.0
    stream.abort()
