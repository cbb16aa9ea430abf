"""Vocabularies: compiled off the decode thread, shared by content, reference-counted, never a stale id."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from backend.engine import Engine, EngineConfig, EngineError, StreamOptions
from biasing.graph import GraphMode, GraphParams
from biasing.nemo.registry import BiasingRegistry
from biasing.terms import Term, TermValidationError
from tests.engine.conftest import noise, random_terms, running


async def test_same_terms_share_one_registration(engine: Engine) -> None:
    a = await engine.load_vocabulary(["linezolid", "husqvarna"])
    b = await engine.load_vocabulary([Term("linezolid"), Term("husqvarna")])
    c = await engine.load_vocabulary(["quarterly revenue"])
    assert a.model_id == b.model_id != c.model_id
    assert engine.stats().registered_vocabularies == 2
    a.release()
    a.release()
    assert engine.stats().registered_vocabularies == 2
    with pytest.raises(EngineError):
        _ = a.model_id
    assert b.terms[0].text == "linezolid"
    b.release()
    c.release()
    assert engine.stats().registered_vocabularies == 0
    assert await engine.decoder_stream_count() == 0  # runs after the queued lease releases
    assert engine._biasing_registry().stats().active_leases == 0


async def test_stream_keeps_its_vocabulary_registered(engine: Engine) -> None:
    handle = await engine.load_vocabulary(["linezolid"])
    stream = engine.open_stream(StreamOptions(chunk_s=0.56, vocabulary=handle))
    model_id = handle.model_id
    handle.release()
    assert engine.stats().registered_vocabularies == 1
    other = await engine.load_vocabulary(["husqvarna"])
    assert other.model_id != model_id  # the stream's id was not freed, so it cannot be reused
    await stream.push(noise(1, 0.56))
    await stream.finish()
    assert engine.stats().registered_vocabularies == 1
    other.release()


async def test_compile_runs_off_the_decode_thread(engine: Engine) -> None:
    threads: list[str] = []
    decoder = engine._loaded_decoder()
    biasing = engine._biasing_registry()
    inner = biasing.compile

    def compile_and_record(terms):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return inner(terms)

    biasing.compile = compile_and_record  # type: ignore[method-assign]
    handle = await engine.load_vocabulary(random_terms(200, seed=3))
    assert threads and threads[0].startswith("engine-compile")
    assert bool(decoder.multi_model.model2active[handle.model_id])
    handle.release()


async def test_invalid_terms_are_rejected(engine: Engine) -> None:
    with pytest.raises(TermValidationError):
        await engine.load_vocabulary(["ok", "bad\u0000term"])
    with pytest.raises(ValueError):
        await engine.load_vocabulary([])


async def test_matched_terms_reported_in_finals(engine: Engine) -> None:
    handle = await engine.load_vocabulary(["re", "he", "the"])
    stream = engine.open_stream(StreamOptions(chunk_s=0.56, vocabulary=handle))
    for i in range(4):
        await stream.push(noise(30 + i, 0.56))
    last = await stream.finish()
    for final in last.finals:
        words = {w.lower() for w in final.text.split()}
        assert set(final.matched_terms) == {t for t in ("re", "he", "the") if t in words}
    handle.release()


@pytest.mark.parametrize("mode", ["case_insensitive", "case_sensitive_tree"])
async def test_graph_mode_and_tau_come_from_the_config(rnnt_model: Path, mode: str) -> None:
    config = EngineConfig(model=str(rnnt_model), biasing_graph_mode=mode, biasing_tau=1.0)
    async with running(config) as engine:
        handle = await engine.load_vocabulary(["Linezolid", "acme group"])
        wanted = GraphParams(mode=GraphMode(mode), tau=1.0)
        expected = BiasingRegistry(engine.tokenizer, wanted).key_for(handle.terms)
        default = BiasingRegistry(engine.tokenizer).key_for(handle.terms)
        assert handle.registration().key == expected != default
        handle.release()


def test_unknown_graph_mode_or_tau_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="biasing_graph_mode must be one of case_insensitive"):
        EngineConfig(model="m.nemo", biasing_graph_mode="fuzzy")
    with pytest.raises(ValueError, match="tau must be in"):
        EngineConfig(model="m.nemo", biasing_tau=9.0)


async def test_stop_ends_the_compile_worker_process(rnnt_model: Path) -> None:
    """Vocabularies compile in a worker process; stopping the engine ends it (no leaked process/semaphore)."""
    before = set(multiprocessing.active_children())
    async with running(EngineConfig(model=str(rnnt_model))) as engine:
        handle = await engine.load_vocabulary(["Linezolid"])
        assert set(multiprocessing.active_children()) - before  # the compile worker
        handle.release()
    assert set(multiprocessing.active_children()) <= before
