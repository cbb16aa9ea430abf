"""The asyncio-facing streaming engine: one decode thread owns the model; one batcher task forms the steps.

Threads and tasks:
- the **decode thread** (a one-worker executor) runs every call into NeMo: model loading, decode steps,
  biasing registration/removal and stream clean-up, strictly in submission order (FIFO);
- the **compile thread** (another one-worker executor) normalises and compiles vocabularies, so a big list
  never stalls the streams being decoded;
- the **batcher task** (event loop) waits for chunks, gathers at most one per live stream per step (waiting up
  to ``max_wait_ms`` for the other live streams), caps a step at ``max_batch_streams``, hands the step to the
  decode thread and resolves one future per stream.

All ``Engine``/``EngineStream`` methods must be called from the event loop thread
(``VocabularyHandle.release`` may be called from any thread). A step, once submitted, runs before any later
clean-up job, which is what makes releasing a biasing id safe: its removal is queued behind every step that
could still read it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch

from backend.engine.decoder import StreamDecoder
from backend.engine.errors import EngineError, EngineOverloaded
from backend.engine.final_pass import FinalPass, FinalVocabulary, RefineJob
from backend.engine.steps import StepItem, StepOutput
from backend.engine.stream import EngineStream, StreamStatus
from backend.engine.types import (
    EngineConfig,
    EngineStats,
    StepResult,
    StreamOptions,
    exact_samples,
)
from backend.engine.vocabulary import (
    Registration,
    VocabularyHandle,
    VocabularyRegistry,
    normalized,
)
from biasing.nemo.registry import BiasingRegistry, CompiledVocabulary, Lease

log = structlog.get_logger(__name__)
BUSY_WINDOW_S = 3.0  # how far back the decode thread's busy share is judged (max_hold_ms)


@dataclass
class _Request:
    """One stream's chunk (``samples``) or flush (``samples`` None) waiting for a step."""

    stream: EngineStream
    samples: np.ndarray | None
    future: asyncio.Future[StepResult]
    enqueued_at: float = field(default_factory=time.monotonic)


class Engine:
    """Every live stream decoded on one NeMo model with continuous batching and per-stream biasing."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self._biasing: BiasingRegistry | None = None
        self._decoder: StreamDecoder | None = None
        self._decode_executor: ThreadPoolExecutor | None = None
        self._compile_executor: ThreadPoolExecutor | None = None
        self._final_executor: ThreadPoolExecutor | None = None
        self._final_backlog = 0  # second-pass jobs submitted and not finished
        # False: new finals keep the first pass's text (the service's degradation ladder sets it under load)
        self.second_pass_enabled = True
        self._batcher: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        # Requests waiting for a step, oldest first; at most one per stream (dict keyed by stream id).
        self._pending: dict[int, _Request] = {}
        self._streams: dict[int, EngineStream] = {}
        self._next_stream_id = 1
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._registry = VocabularyRegistry(remove=self._schedule_unregister)
        self._last_batch_streams = 0
        self._max_batch_streams_seen = 0
        self._last_step_ms = 0.0
        self._queue_wait_ms = 0.0
        self._steps_total = 0
        self._final_tasks: set[asyncio.Task[None]] = set()
        self._recent_steps: deque[tuple[float, float]] = deque()  # (start, end) of recent steps

    async def start(self) -> None:
        """Load the model on the decode thread, warm it up, and start the batcher task."""
        if self._decode_executor is not None:
            raise EngineError("engine already started")
        threads = self.config.torch_threads
        self._decode_executor = ThreadPoolExecutor(
            1, "engine-decode", initializer=torch.set_num_threads, initargs=(threads,)
        )
        self._compile_executor = ThreadPoolExecutor(
            1, "engine-compile", initializer=torch.set_num_threads, initargs=(threads,)
        )
        # The second pass runs here, beside the decode thread (the second core): a step's partials and the
        # streams without a final go out at once, the finals when Whisper has re-read them (issue 37).
        self._final_executor = ThreadPoolExecutor(
            1, "engine-final", initializer=torch.set_num_threads, initargs=(threads,)
        )
        loop = self._loop = asyncio.get_running_loop()
        self._decoder = await loop.run_in_executor(self._decode_executor, self._load)
        cache_dir = Path(self.config.vocabulary_cache_dir) if self.config.vocabulary_cache_dir else None
        # Compiles run in a worker process: a 10,000-term compile in a thread of this process holds the GIL
        # and stalls every stream's decode step (measured in bench/bench_registry.py).
        self._biasing = BiasingRegistry(
            self._decoder.tokenizer,
            params=self.config.graph_params(),
            cache_dir=cache_dir,
            compile_processes=1,
        )
        self._batcher = asyncio.create_task(self._batch_loop(), name="engine-batcher")
        self._batcher.add_done_callback(self._on_batcher_done)

    def _load(self) -> StreamDecoder:
        from nemo.utils import logging as nemo_logging

        nemo_logging.setLevel(nemo_logging.WARNING)
        decoder = StreamDecoder(self.config)
        decoder.warm_up()
        return decoder

    async def stop(self) -> None:
        """Stop the batcher, fail every waiting request, and shut the worker threads down."""
        self._stopping = True
        if self._batcher is not None:
            self._batcher.cancel()
            try:
                await self._batcher
            except asyncio.CancelledError:
                pass
        self._fail_pending(EngineError("engine stopped"))
        if self._final_tasks:  # finals being re-read: sent with or without the second pass, never lost
            await asyncio.gather(*self._final_tasks, return_exceptions=True)
        for stream in list(self._streams.values()):
            stream._close(StreamStatus.ABORTED)
        for executor in (self._compile_executor, self._final_executor, self._decode_executor):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, wait=True)
        if self._biasing is not None:  # the compile process: otherwise it outlives the engine
            await asyncio.to_thread(self._biasing.close)

    @property
    def ready(self) -> bool:
        """Loaded, warmed up, batcher alive and no decode failure."""
        return (
            self._decoder is not None
            and self._failure is None
            and not self._stopping
            and self._batcher is not None
            and not self._batcher.done()
        )

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer once loaded (the service rejects terms it cannot represent), else None."""
        return self._decoder.tokenizer if self._decoder is not None else None

    def _require_ready(self) -> StreamDecoder:
        if self._failure is not None:
            raise EngineError(f"engine failed: {self._failure!r}")
        if not self.ready or self._decoder is None:
            raise EngineError("engine is not ready")
        return self._decoder

    def chunk_samples(self, chunk_s: float) -> int:
        """Samples per chunk at 16 kHz (0.56 s -> 8960, 1.12 s -> 17920); ValueError for other sizes."""
        return exact_samples(self._allowed_chunk_s(chunk_s))

    def _allowed_chunk_s(self, chunk_s: float) -> float:
        for allowed in self.config.allowed_chunk_s:
            if abs(allowed - chunk_s) < 1e-9:
                return allowed
        raise ValueError(f"chunk_s must be one of {self.config.allowed_chunk_s}, got {chunk_s}")

    def stats(self) -> EngineStats:
        """A snapshot for /metrics."""
        lags = [stream.received_s - stream.audio_decoded_s for stream in self._streams.values()]
        final_pass = self._decoder.final_pass if self._decoder is not None else None
        return EngineStats(
            ready=self.ready,
            live_streams=len(self._streams),
            last_batch_streams=self._last_batch_streams,
            max_batch_streams_seen=self._max_batch_streams_seen,
            last_step_ms=self._last_step_ms,
            queue_wait_ms=self._queue_wait_ms,
            max_lag_s=max(lags, default=0.0),
            steps_total=self._steps_total,
            registered_vocabularies=len(self._registry),
            final_pass_outcomes=tuple(sorted(dict(final_pass.outcomes).items())) if final_pass else (),
            final_pass_last_ms=final_pass.last_ms if final_pass else 0.0,
            final_pass_backlog=self._final_backlog,
            decoding_ms_per_audio_s=self._decoder.decoding_cost.ms_per_audio_s() if self._decoder else (),
        )

    async def load_vocabulary(self, terms: Sequence[Any]) -> VocabularyHandle:
        """Normalise and compile ``terms`` (``biasing.terms.Term`` or str) off the decode thread, register the
        result in the decoder between steps, and return a handle. The same terms share one registration.

        Raises ``biasing.terms.TermValidationError`` (a ValueError) for invalid terms, ValueError if empty.
        """
        decoder = self._require_ready()
        biasing = self._biasing_registry()
        loop = asyncio.get_running_loop()
        terms_n = await loop.run_in_executor(self._compile_executor, normalized, terms, decoder.tokenizer)
        if not terms_n:
            raise ValueError("a vocabulary needs at least one term")
        key = biasing.key_for(terms_n)
        registration = self._registry.lookup_and_ref(key)
        if registration is None:
            compiled = await loop.run_in_executor(self._compile_executor, biasing.compile, terms_n)
            final_scorer = None
            if decoder.final_pass is not None:  # the same list, compiled for the second pass's tokens
                final_scorer = await loop.run_in_executor(
                    self._compile_executor, decoder.final_pass.compile, terms_n, self.config.graph_params()
                )
            self._require_ready()
            lease = await loop.run_in_executor(self._decode_executor, self._register, compiled)
            new = Registration(key, terms_n, lease)
            if final_scorer is not None:
                new.final_vocabulary = FinalVocabulary(final_scorer, new.finder)
            registration = self._registry.add(new)
            if registration.lease is not lease:  # an identical list was registered meanwhile
                self._schedule_unregister(lease)
        return VocabularyHandle(self._registry, registration)

    def _biasing_registry(self) -> BiasingRegistry:
        if self._biasing is None:
            raise EngineError("engine is not started")
        return self._biasing

    def _register(self, compiled: CompiledVocabulary) -> Lease:
        """The one lease the engine holds on a compiled list's id in the multi-model (decode thread)."""
        return self._biasing_registry().acquire(
            compiled, self._loaded_decoder().multi_model, self.config.biasing_alpha
        )

    def _schedule_unregister(self, lease: Lease) -> None:
        """Give the lease back on the decode thread, behind every step that could still read its id."""
        self._submit_cleanup(self._biasing_registry().release, lease)

    def _loaded_decoder(self) -> StreamDecoder:
        if self._decoder is None:
            raise EngineError("engine is not started")
        return self._decoder

    def _submit_cleanup(self, fn: Any, *args: Any) -> None:
        """Queue a clean-up job on the decode thread (behind every submitted step); no-op once shut down.
        A failing clean-up leaves NeMo state in doubt: it fails the engine like a failed step."""
        if self._decode_executor is None or self._decoder is None or self._loop is None:
            return
        try:
            job = self._decode_executor.submit(fn, *args)
        except RuntimeError:  # executor shut down: the process is ending, NeMo state goes with it
            return
        loop = self._loop
        job.add_done_callback(lambda done: loop.call_soon_threadsafe(self._on_cleanup_done, done))

    def _on_cleanup_done(self, job: Any) -> None:
        error = job.exception()
        if error is not None and self._failure is None:
            self._failure = error
            self._fail_pending(EngineError(f"clean-up failed: {error!r}"))

    def open_stream(self, options: StreamOptions) -> EngineStream:
        """A new stream; ``EngineOverloaded`` beyond ``max_live_streams``, ValueError for bad options."""
        decoder = self._require_ready()
        options = replace(options, chunk_s=self._allowed_chunk_s(options.chunk_s))  # the pipeline's own key
        chunk_samples = self.chunk_samples(options.chunk_s)
        if options.decoding not in decoder.decodings:
            raise ValueError(f"decoding must be one of {decoder.decodings}, got {options.decoding!r}")
        if len(self._streams) >= self.config.max_live_streams:
            raise EngineOverloaded(f"{len(self._streams)} live streams (max_live_streams)")
        registration = None
        if options.vocabulary is not None:
            if not isinstance(options.vocabulary, VocabularyHandle):
                raise TypeError("the vocabulary must come from this engine's load_vocabulary")
            registration = options.vocabulary.registration()
            self._registry.ref(registration)
        stream = EngineStream(
            self._next_stream_id,
            options,
            chunk_samples,
            registration,
            registry=self._registry,
            enqueue=self._enqueue,
            on_close=self._stream_closed,
            leading_silence_dbfs=self.config.leading_silence_dbfs,
            input_gain_max_db=self.config.input_gain_max_db,
        )
        self._next_stream_id += 1
        self._streams[stream.stream_id] = stream
        return stream

    def _enqueue(self, stream: EngineStream, samples: np.ndarray | None) -> asyncio.Future[StepResult]:
        self._require_ready()
        future: asyncio.Future[StepResult] = asyncio.get_running_loop().create_future()
        self._pending[stream.stream_id] = _Request(stream, samples, future)
        self._wakeup.set()
        return future

    def _stream_closed(self, stream: EngineStream, holds_decoder_state: bool) -> None:
        """A stream closed: free its slot, its waiting request and, if NeMo still holds state for it (it never
        saw the last chunk), that state on the decode thread."""
        self._forget(stream)
        if holds_decoder_state and self._decoder is not None:
            options = stream.options
            drop = self._decoder.drop_stream
            self._submit_cleanup(drop, stream.stream_id, options.chunk_s, options.decoding)

    def _forget(self, stream: EngineStream) -> None:
        """Drop a closing stream's waiting request and live-stream slot (event loop thread)."""
        self._streams.pop(stream.stream_id, None)
        request = self._pending.pop(stream.stream_id, None)
        if request is not None and not request.future.done():
            request.future.cancel()
        self._wakeup.set()  # the batcher may be waiting for this stream

    async def _batch_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._pending:
                continue
            await self._gather()
            batch = self._take_batch()
            if batch:
                await self._run_step(batch)
                if self._failure is not None:
                    return

    def busy_fraction(self, now: float | None = None) -> float:
        """The share of the last ``BUSY_WINDOW_S`` the decode thread spent in steps."""
        now = time.monotonic() if now is None else now
        self._forget_steps_before(now - BUSY_WINDOW_S)
        busy = sum(end - max(start, now - BUSY_WINDOW_S) for start, end in self._recent_steps)
        return busy / BUSY_WINDOW_S

    def _forget_steps_before(self, cutoff: float) -> None:
        while self._recent_steps and self._recent_steps[0][1] < cutoff:
            self._recent_steps.popleft()

    async def _gather(self) -> None:
        """Wait until every live stream has a chunk waiting (up to ``max_batch_streams``) or until the oldest
        waiting chunk has waited ``max_wait_ms``; ``max_hold_ms`` instead while the decode thread was busy
        more than ``hold_when_busy`` of the last seconds (issue 37: streams send at their own phases, so a
        saturated decoder otherwise runs several small steps per chunk, each paying beam search's fixed
        cost; holding lets most streams share one step)."""
        max_wait_s = self.config.max_wait_ms / 1000.0
        if (
            self.config.max_hold_ms > self.config.max_wait_ms
            and self.busy_fraction() > self.config.hold_when_busy
        ):
            max_wait_s = self.config.max_hold_ms / 1000.0
        while self._pending:
            wanted = min(len(self._streams), self.config.max_batch_streams)
            if len(self._pending) >= wanted:
                return
            oldest = next(iter(self._pending.values())).enqueued_at
            remaining = oldest + max_wait_s - time.monotonic()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout=remaining)
            except TimeoutError:
                return

    def _take_batch(self) -> list[tuple[_Request, StepItem]]:
        batch: list[tuple[_Request, StepItem]] = []
        for stream_id in list(self._pending)[: self.config.max_batch_streams]:
            request = self._pending.pop(stream_id)
            if request.future.done():  # the caller gave up waiting before the step
                continue
            batch.append((request, request.stream.step_item(request.samples)))
        if self._pending:
            self._wakeup.set()  # leftovers already waited: next step at once
        return batch

    async def _run_step(self, batch: list[tuple[_Request, StepItem]]) -> None:
        started = time.monotonic()
        self._queue_wait_ms = (started - min(r.enqueued_at for r, _ in batch)) * 1000.0
        items = [item for _, item in batch]
        loop = asyncio.get_running_loop()
        try:
            outputs, job = await loop.run_in_executor(self._decode_executor, self._decode_step, items)
        except Exception as exc:  # a failed step fails the engine: the service closes sessions (1011)
            self._failure = exc
            error = EngineError(f"decode step failed: {exc!r}")
            error.__cause__ = exc
            for request, _ in batch:
                if not request.future.done():
                    request.future.set_exception(error)
            self._fail_pending(error)
            return
        ended = time.monotonic()
        self._recent_steps.append((started, ended))
        self._forget_steps_before(ended - BUSY_WINDOW_S)  # kept bounded whether or not anyone reads it
        self._last_step_ms = (ended - started) * 1000.0
        self._last_batch_streams = len(batch)
        self._max_batch_streams_seen = max(self._max_batch_streams_seen, len(batch))
        self._steps_total += 1
        waiting: list[int] = []
        for index, ((request, item), output) in enumerate(zip(batch, outputs, strict=True)):
            if job is not None and job.waits(index):
                waiting.append(index)
                continue
            self._resolve(request, item, output)
        if job is not None:
            task = asyncio.create_task(self._second_pass([batch[i] for i in waiting], waiting, job))
            self._final_tasks.add(task)
            task.add_done_callback(self._final_tasks.discard)

    async def _second_pass(
        self, waiting: list[tuple[_Request, StepItem]], indices: list[int], job: RefineJob
    ) -> None:
        """Resolve the streams of a step that committed finals once the second pass has read them, on its own
        thread. With ``second_pass_enabled`` off (the service's degradation ladder) the first pass's finals
        stand.
        A failing second pass costs its refinement, never a final: the first pass's finals are sent."""
        final_pass = self._loaded_decoder().final_pass
        outputs = list(job.outputs)
        if final_pass is not None and self._final_executor is not None:
            skip = None if self.second_pass_enabled else "skipped_load"
            self._final_backlog += 1
            try:
                outputs = await asyncio.get_running_loop().run_in_executor(
                    self._final_executor, _apply_second_pass, final_pass, job, skip
                )
            except Exception as exc:  # noqa: BLE001 - the first pass's finals stand
                log.warning("second pass failed; the first pass's finals stand", error=repr(exc))
            finally:
                self._final_backlog -= 1
        for (request, item), index in zip(waiting, indices, strict=True):
            self._resolve(request, item, outputs[index])

    @staticmethod
    def _resolve(request: _Request, item: StepItem, output: StepOutput) -> None:
        result = request.stream.on_step(item, output)
        if not request.future.done():
            request.future.set_result(result)

    def _decode_step(self, items: list[StepItem]) -> tuple[list[StepOutput], RefineJob | None]:
        # an open utterance is re-read only while the second pass is on and idle: a stream's partial never
        # waits behind other streams' finals (the re-read is tried again on its next step)
        reread = self.second_pass_enabled and self._final_backlog == 0
        return self._loaded_decoder().step_first(items, reread)

    def _fail_pending(self, error: EngineError) -> None:
        pending, self._pending = self._pending, {}
        for request in pending.values():
            if not request.future.done():
                request.future.set_exception(error)

    def _on_batcher_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self._failure is None:
            self._failure = exc
            self._fail_pending(EngineError(f"batcher failed: {exc!r}"))

    async def decoder_stream_count(self) -> int:
        """Streams the decoder holds state for, counted on the decode thread after queued jobs."""
        decoder = self._loaded_decoder()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._decode_executor, decoder.live_stream_count)


def _apply_second_pass(final_pass: FinalPass, job: RefineJob, skip: str | None) -> list[StepOutput]:
    """The second pass of one step (the engine's final-pass thread)."""
    with torch.inference_mode():
        return final_pass.apply(job, skip=skip)
