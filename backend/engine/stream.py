"""``EngineStream``: one client's audio stream, the engine's per-stream lifecycle and bookkeeping."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Awaitable, Callable

import numpy as np

from backend.engine.errors import EngineError
from backend.engine.level import LevelMeter
from backend.engine.steps import NO_BIASING, StepItem, StepOutput
from backend.engine.types import SAMPLE_RATE_HZ, Final, StepResult, StreamOptions, Word
from backend.engine.vocabulary import Registration, VocabularyHandle, VocabularyRegistry

Enqueue = Callable[["EngineStream", "np.ndarray | None"], Awaitable[StepResult]]
"""Hands one chunk (or the flush, ``None``) to the batcher; resolves with that step's result."""
OnClose = Callable[["EngineStream", bool], None]
"""Called once when the stream closes, with whether the decoder still holds state for it (it never saw the
stream's last chunk), so the owner can free its slot and that state."""


class StreamStatus(enum.Enum):
    """Lifecycle of an ``EngineStream``: open -> finished | aborted (both final)."""

    OPEN = "open"
    FINISHED = "finished"
    ABORTED = "aborted"


class EngineStream:
    """One client's audio stream. At most one ``push``/``finish`` in flight; call from the event loop thread.

    Lifecycle: open -> finished (``finish``) | aborted (``abort``, or the engine stopped).
    The stream knows its owner only through ``enqueue``, ``on_close`` and the vocabulary ``registry`` that
    counts its reference to ``registration`` (already counted by the caller).
    """

    def __init__(
        self,
        stream_id: int,
        options: StreamOptions,
        chunk_samples: int,
        registration: Registration | None,
        *,
        registry: VocabularyRegistry,
        enqueue: Enqueue,
        on_close: OnClose,
        leading_silence_dbfs: float | None = None,
        input_gain_max_db: float = 0.0,
    ) -> None:
        self.stream_id = stream_id
        self.options = options
        self.chunk_samples = chunk_samples
        self.status = StreamStatus.OPEN
        self.received_s = 0.0
        self.audio_decoded_s = 0.0
        self._registry = registry
        self._enqueue = enqueue
        self._on_close = on_close
        self._registration = registration
        self._step_registration: Registration | None = None
        self._biasing_generation = 0
        self._started = False
        self._last_sent = False
        self._in_flight = False
        # Leading chunks without speech are skipped, not decoded (None: none is); see EngineConfig.
        gate = leading_silence_dbfs is not None and leading_silence_dbfs > -150.0
        self._gate_leading_silence = gate
        self._meter = LevelMeter(
            options.chunk_s,
            min_dbfs=leading_silence_dbfs if leading_silence_dbfs is not None and gate else -70.0,
            max_gain_db=input_gain_max_db,
        )
        self._skipped_s = 0.0

    async def push(self, pcm: bytes | np.ndarray) -> StepResult:
        """Decode exactly one chunk: PCM16 little-endian bytes or a float32 array of ``chunk_samples``."""
        self._expect_open()
        samples = self._meter.process(self._to_float32(pcm))
        if not self._started and self._gate_leading_silence and not self._meter.audible:
            result = await self._skip(samples)
        else:
            result = await self._submit(samples)
        return dataclasses.replace(result, level=self._meter.report())

    async def finish(self) -> StepResult:
        """Flush: decode the end of the stream and commit the last partial as a final. Closes the stream."""
        self._expect_open()
        if not self._started:
            self._close(StreamStatus.FINISHED)
            return StepResult(partial="", finals=(), audio_decoded_s=self.audio_decoded_s)
        try:
            return await self._submit(None)
        finally:
            self._close(StreamStatus.FINISHED)

    async def set_vocabulary(self, handle: VocabularyHandle | None) -> None:
        """Use ``handle`` (None: no biasing) from the next step on; the stream's biasing state restarts."""
        self._expect_open()
        new = handle.registration() if handle is not None else None
        if new is not None:
            self._registry.ref(new)
        old, self._registration = self._registration, new
        self._biasing_generation += 1
        if old is not None:
            self._registry.unref(old)

    def abort(self) -> None:
        """The client vanished: free the decoder state, the batch slot and the vocabulary reference, with no
        final. Idempotent."""
        if self.status is not StreamStatus.OPEN:
            return
        self._close(StreamStatus.ABORTED)

    def _expect_open(self) -> None:
        if self.status is not StreamStatus.OPEN:
            raise EngineError(f"expected stream {StreamStatus.OPEN.value}, got {self.status.value}")
        if self._in_flight:
            raise RuntimeError("a chunk of this stream is already being decoded")

    def _to_float32(self, pcm: bytes | np.ndarray) -> np.ndarray:
        if isinstance(pcm, bytes | bytearray | memoryview):
            if len(pcm) != 2 * self.chunk_samples:
                raise ValueError(f"expected {2 * self.chunk_samples} bytes of PCM16, got {len(pcm)}")
            return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        if not isinstance(pcm, np.ndarray) or pcm.dtype != np.float32 or pcm.shape != (self.chunk_samples,):
            raise ValueError(f"expected a float32 array of shape ({self.chunk_samples},)")
        return pcm

    async def _skip(self, samples: np.ndarray) -> StepResult:
        """A leading chunk without speech: counted as received and decoded, never shown to the decoder (which
        starts at the first chunk with speech; finals' times are shifted by what was skipped)."""
        self._in_flight = True
        seconds = len(samples) / SAMPLE_RATE_HZ
        self.received_s += seconds
        try:
            await asyncio.sleep(0)  # like a decoded chunk, the push yields to the event loop
        finally:
            self._in_flight = False
        self.audio_decoded_s += seconds
        self._skipped_s += seconds
        return StepResult(partial="", finals=(), audio_decoded_s=self.audio_decoded_s)

    async def _submit(self, samples: np.ndarray | None) -> StepResult:
        self._in_flight = True
        if samples is not None:
            self.received_s += self.chunk_samples / SAMPLE_RATE_HZ
        try:
            return await self._enqueue(self, samples)
        finally:
            self._in_flight = False

    def step_item(self, samples: np.ndarray | None) -> StepItem:
        """For the batcher, when this stream's request enters a step (reads the biasing id at that moment)."""
        is_first = not self._started
        self._started = True
        self._last_sent = samples is None
        self._step_registration = self._registration
        model_id = self._registration.model_id if self._registration is not None else NO_BIASING
        return StepItem(
            stream_id=self.stream_id,
            chunk_s=self.options.chunk_s,
            decoding=self.options.decoding,
            samples=samples,
            is_first=is_first,
            is_last=samples is None,
            model_id=model_id,
            biasing_generation=self._biasing_generation,
            final_vocabulary=self._registration.final_vocabulary if self._registration is not None else None,
        )

    def on_step(self, item: StepItem, output: StepOutput) -> StepResult:
        """For the batcher: this stream's result of the step that decoded ``item``."""
        if item.samples is not None:
            self.audio_decoded_s += self.chunk_samples / SAMPLE_RATE_HZ
        registration = self._step_registration
        finals = tuple(self._finish_final(final, registration) for final in output.finals)
        return StepResult(partial=output.partial, finals=finals, audio_decoded_s=self.audio_decoded_s)

    def _finish_final(self, final: Final, registration: Registration | None) -> Final:
        """Times shifted by the skipped leading silence and clamped to the decoded audio (NeMo spreads tokens
        of one frame over later frames), and the vocabulary terms found in the text."""
        limit, shift = self.audio_decoded_s, self._skipped_s
        words = tuple(
            Word(w.text, min(w.start_s + shift, limit), min(w.end_s + shift, limit)) for w in final.words
        )
        matched = registration.matched_terms(final.text) if registration is not None else ()
        start_s, end_s = min(final.start_s + shift, limit), min(final.end_s + shift, limit)
        return Final(final.text, start_s, end_s, words, matched, final.source)

    def _close(self, status: StreamStatus) -> None:
        if self.status is not StreamStatus.OPEN:
            return
        self.status = status
        self._on_close(self, self._started and not self._last_sent)  # NeMo holds state until is_last
        registration, self._registration = self._registration, None
        if registration is not None:
            self._registry.unref(registration)
