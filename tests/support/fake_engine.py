"""A scripted stand-in for the batched decoder, for testing the web layer's own logic only.

The input level each chunk reports is ``FakeEngine.input_level``, set by the test.

Audio convention (PCM16 chunks): a chunk whose first sample is 0 is silence and ends the utterance; a
chunk whose first sample is ``VOCAB_SAMPLE`` says the stream's first vocabulary term (only when the
stream has a vocabulary, like a boosted word); any other chunk says ``word<first sample>``.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine.errors import EngineError
from backend.engine.types import EngineStats, Final, InputLevel, StepResult, StreamOptions, Word

VOCAB_SAMPLE = 7


@dataclass
class FakeHandle:
    terms: list[str]
    engine: FakeEngine
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.engine.live_handles.discard(id(self))


@dataclass
class FakeStream:
    engine: FakeEngine
    options: StreamOptions
    words: list[str] = field(default_factory=list)
    start_s: float = 0.0
    decoded_s: float = 0.0
    finals: int = 0
    busy: bool = False

    async def push(self, pcm: bytes) -> StepResult:
        if self.busy:
            raise RuntimeError("one chunk in flight per stream")
        self.busy = True
        try:
            await asyncio.sleep(self.engine.step_delay_s)
            if self.engine.gate is not None:  # a test holds the decoder: each step waits for a release
                await asyncio.to_thread(self.engine.gate.acquire)
            if self.engine.fail_next:
                self.engine.fail_next = False
                self.engine.ready = False
                raise EngineError("injected decode failure")
            first = struct.unpack_from("<h", pcm)[0]
            begin = self.decoded_s
            self.decoded_s += self.options.chunk_s
            self.engine.pushed += 1
            if first == 0:
                return StepResult("", self._commit(), self.decoded_s, self.engine.input_level)
            vocab = self.options.vocabulary
            if first == VOCAB_SAMPLE and isinstance(vocab, FakeHandle) and vocab.terms:
                if vocab.released:
                    raise EngineError("stream used a released vocabulary")
                self.words.append(vocab.terms[0])
            else:
                self.words.append(f"word{first}")
            if len(self.words) == 1:
                self.start_s = begin
            return StepResult(" ".join(self.words), (), self.decoded_s, self.engine.input_level)
        finally:
            self.busy = False

    def _commit(self) -> tuple[Final, ...]:
        if not self.words:
            return ()
        text = " ".join(self.words)
        final = Final(
            text, self.start_s, self.decoded_s, (Word(self.words[0], self.start_s, self.decoded_s),)
        )
        self.words = []
        self.finals += 1
        return (final,)

    async def finish(self) -> StepResult:
        self.engine.open_streams.discard(id(self))
        return StepResult("", self._commit(), self.decoded_s)

    async def set_vocabulary(self, handle: FakeHandle | None) -> None:
        self.options = StreamOptions(self.options.chunk_s, self.options.decoding, handle)

    def abort(self) -> None:
        self.engine.open_streams.discard(id(self))


@dataclass
class FakeEngine:
    """Same async API as ``backend.engine.Engine``; counts handles and streams so tests can check leaks."""

    step_delay_s: float = 0.0
    gate: threading.Semaphore | None = None
    fail_next: bool = False
    ready: bool = False
    second_pass_enabled: bool = True  # set by the ladder's first rung (there is no second pass to turn off)
    tokenizer: object = None
    pushed: int = 0
    live_handles: set[int] = field(default_factory=set)
    open_streams: set[int] = field(default_factory=set)
    loaded_vocabularies: list[list[str]] = field(default_factory=list)
    input_level: InputLevel | None = None  # what every chunk's result says of the input level

    async def start(self) -> None:
        self.ready = True

    async def stop(self) -> None:
        self.ready = False

    def chunk_samples(self, chunk_s: float) -> int:
        if chunk_s not in (0.56, 1.12):
            raise ValueError(f"unsupported chunk {chunk_s}")
        return round(chunk_s * 16000)

    async def load_vocabulary(self, terms: Sequence[Any]) -> FakeHandle:
        texts = [t if isinstance(t, str) else t.text for t in terms]
        self.loaded_vocabularies.append(texts)
        handle = FakeHandle(texts, self)
        self.live_handles.add(id(handle))
        return handle

    def open_stream(self, options: StreamOptions) -> FakeStream:
        stream = FakeStream(self, options)
        self.open_streams.add(id(stream))
        return stream

    def stats(self) -> EngineStats:
        return EngineStats(
            ready=self.ready,
            live_streams=len(self.open_streams),
            last_batch_streams=1,
            max_batch_streams_seen=1,
            last_step_ms=1.0,
            queue_wait_ms=0.0,
            max_lag_s=0.0,
            steps_total=self.pushed,
            registered_vocabularies=len(self.live_handles),
            decoding_ms_per_audio_s=(("greedy", 1.5),),
        )


def chunk(first_sample: int, chunk_s: float = 0.56) -> bytes:
    """One PCM16 chunk whose first sample is ``first_sample`` (the fake's script), the rest quiet."""
    samples = round(chunk_s * 16000)
    return struct.pack("<h", first_sample) + b"\x01\x00" * (samples - 1)
