"""The real engine and the web layer's test double satisfy one contract (``backend.engine.contract``).

mypy checks the assignments below in ``make test`` (a method missing or with another signature fails the
type check); at run time the test checks the members the service calls are there and callable."""

from __future__ import annotations

from pathlib import Path

from backend.engine import Engine, EngineConfig
from backend.engine.contract import CaptionEngine, CaptionStream
from backend.engine.types import StreamOptions
from tests.support.fake_engine import FakeEngine, FakeStream

ENGINE_CALLS = ("start", "stop", "chunk_samples", "stats", "load_vocabulary", "open_stream")
STREAM_CALLS = ("push", "finish", "set_vocabulary", "abort")


def test_both_engines_and_their_streams_satisfy_the_contract(tmp_path: Path) -> None:
    real: CaptionEngine = Engine(EngineConfig(model=str(tmp_path / "not-loaded.nemo")))
    fake_engine = FakeEngine()
    fake: CaptionEngine = fake_engine
    stream: CaptionStream = FakeStream(fake_engine, StreamOptions(chunk_s=0.56))
    for engine in (real, fake):
        assert all(callable(getattr(engine, name)) for name in ENGINE_CALLS)
        assert engine.ready is False  # nothing started
    assert all(callable(getattr(stream, name)) for name in STREAM_CALLS)
    assert fake.stats().live_streams == 0 and real.stats().live_streams == 0
