"""The decode-thread side of the engine: one loaded model, one NeMo pipeline per (chunk size, decoding).

``StreamDecoder`` is not thread-safe; the engine calls it only from its single decode thread. It knows streams
by integer id, turns one batch of ``StepItem`` (at most one per stream) into NeMo ``Frame`` objects and runs
one call per (chunk size, decoding) group: greedy groups go through NeMo's pipeline step; beam groups use the
pipeline only for buffering and encoding (buffered or cache-aware), then our streaming beam search
(``beam.py``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch

from backend.engine.beam_streams import BeamStreams
from backend.engine.final_guards import capitalized, collapse_stutter
from backend.engine.final_pass import FinalPass, FinalPassConfig, RefineJob
from backend.engine.nemo_pipelines import (
    ChunkPipeline,
    build_buffered_pipeline,
    build_cache_aware_pipeline,
    build_wrapper,
    greedy_decoding_cfg,
    is_cache_aware,
    load_asr_model,
)
from backend.engine.steps import NO_BIASING, StepItem, StepOutput, make_frame
from backend.engine.types import EngineConfig, Final, Word, collapse_repeated_marks
from biasing.nemo.multi_model import install_sparse_advance


class DecodingCost:
    """Decode-thread time (wall and CPU) of each decoding mode's groups (their encoder and first-pass
    decoding, not the second pass) and the audio they decoded, since start; written on the decode thread,
    read for /metrics from any (its keys are fixed at start)."""

    def __init__(self, decodings: tuple[str, ...]) -> None:
        self._seconds = dict.fromkeys(decodings, 0.0)
        self._cpu_s = dict.fromkeys(decodings, 0.0)
        self._audio_s = dict.fromkeys(decodings, 0.0)

    def add(self, decoding: str, seconds: float, cpu_s: float, audio_s: float) -> None:
        self._seconds[decoding] += seconds
        self._cpu_s[decoding] += cpu_s
        self._audio_s[decoding] += audio_s

    def totals(self) -> dict[str, tuple[float, float, float]]:
        """Per decoding mode: (wall seconds, decode-thread CPU seconds, audio seconds) since start (for
        benchmarks on a shared machine, where CPU time is what other processes do not inflate)."""
        return {d: (self._seconds[d], self._cpu_s[d], self._audio_s[d]) for d in self._audio_s}

    def ms_per_audio_s(self) -> tuple[tuple[str, float], ...]:
        """Per decoding mode that has decoded audio: milliseconds of decode thread per second of audio."""
        return tuple(
            (decoding, 1000.0 * self._seconds[decoding] / audio_s)
            for decoding, audio_s in sorted(self._audio_s.items())
            if audio_s > 0
        )


class StreamDecoder:
    """Owns the NeMo model, its pipelines and the per-stream biasing multi-model (decode thread only)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        asr_model = load_asr_model(config.model, config.device)
        if config.int8_encoder and config.device == "cpu":
            from captions_model.nemo_encoder import quantize_encoder

            asr_model.encoder = quantize_encoder(asr_model.encoder)
        self.wrapper = build_wrapper(
            asr_model, config.device, greedy_decoding_cfg(config.max_symbols_per_step)
        )
        self.tokenizer = self.wrapper.tokenizer
        self.cache_aware = is_cache_aware(asr_model)
        build = build_cache_aware_pipeline if self.cache_aware else build_buffered_pipeline
        self._pipelines: dict[tuple[float, str], ChunkPipeline] = {}
        for chunk_s in config.allowed_chunk_s:
            self._pipelines[(chunk_s, "greedy")] = build(config, self.wrapper, chunk_s)
        self.greedy_computer = self.wrapper.asr_model.decoding.decoding.decoding_computer
        if self.greedy_computer.biasing_multi_model is None:
            raise RuntimeError("the model's greedy decoder has no per-stream biasing multi-model")
        # One gather per advance instead of NeMo's batch x vocabulary work per back-off hop (same scores).
        self.multi_model = install_sparse_advance(self.greedy_computer)
        with torch.inference_mode(False):  # its buffers are edited in place by add/remove_model later
            self.multi_model.to(self.wrapper.device)
        self._biasing: dict[int, tuple[int, int]] = {}  # stream id -> (model id, generation)
        self._beam = BeamStreams(config, self.wrapper, self.multi_model)
        for chunk_s in config.allowed_chunk_s:
            # a cache-aware pipeline's slots (encoder caches) serve its beam streams too: beam streams never
            # enter its NeMo step, only its bufferer and cache slots (ChunkPipeline.encode)
            if self.cache_aware:
                greedy = self._pipelines[(chunk_s, "greedy")]
                if not greedy.pipeline.prompt_enabled:  # a language prompt goes with NeMo's step only
                    self._pipelines[(chunk_s, "beam")] = greedy
            else:
                self._pipelines[(chunk_s, "beam")] = build_buffered_pipeline(config, self.wrapper, chunk_s)
        self.decoding_cost = DecodingCost(self.decodings)
        self.final_pass: FinalPass | None = None
        if config.final_pass != "off":
            self.final_pass = FinalPass(final_pass_config(config))

    @property
    def decodings(self) -> tuple[str, ...]:
        """Decoding modes this decoder serves."""
        return tuple(sorted({decoding for _, decoding in self._pipelines}))

    def chunk_pipeline(self, chunk_s: float, decoding: str) -> ChunkPipeline:
        """The pipeline serving streams of this chunk duration and decoding mode."""
        try:
            return self._pipelines[(chunk_s, decoding)]
        except KeyError:
            raise ValueError(f"no pipeline for chunk {chunk_s} s with {decoding} decoding") from None

    def step(self, items: list[StepItem]) -> list[StepOutput]:
        """Decode one batch (at most one item per stream), second pass included; outputs are in the order of
        ``items``."""
        outputs, job = self.step_first(items)
        if job is None or self.final_pass is None:
            return outputs
        with torch.inference_mode():
            return self.final_pass.apply(job)

    def step_first(
        self, items: list[StepItem], reread: bool = True
    ) -> tuple[list[StepOutput], RefineJob | None]:
        """The first pass of one batch, and the second pass's work for its finals (None: none to do), which
        ``FinalPass.apply`` may run on another thread (the engine does). ``reread``: open utterances due for
        the live re-read get it in this step's job (else they wait for a later step)."""
        if len({item.stream_id for item in items}) != len(items):
            raise ValueError("a step holds at most one chunk per stream")
        groups: dict[tuple[float, str], list[int]] = defaultdict(list)
        for index, item in enumerate(items):
            groups[(item.chunk_s, item.decoding)].append(index)
        if self.final_pass is not None:
            for item in items:
                self.final_pass.observe(item)
        outputs: list[StepOutput | None] = [None] * len(items)
        for key, indices in groups.items():
            chunk_pipeline = self.chunk_pipeline(*key)
            group = [items[i] for i in indices]
            started, started_cpu = time.perf_counter(), time.thread_time()
            chunk_pipeline.activate()
            with torch.inference_mode():
                if self._beam is not None and key[1] == "beam":
                    results = self._beam.step(chunk_pipeline, group)
                else:
                    frames = [self._frame(chunk_pipeline, item) for item in group]
                    results = [_convert(r) for r in chunk_pipeline.pipeline.transcribe_step(frames)]
            audio_s = key[0] * sum(item.samples is not None for item in group)
            cpu_s = time.thread_time() - started_cpu
            self.decoding_cost.add(key[1], time.perf_counter() - started, cpu_s, audio_s)
            for index, item, result in zip(indices, group, results, strict=True):
                outputs[index] = result
                if item.is_last:
                    self._biasing.pop(item.stream_id, None)
        done = [output for output in outputs if output is not None]
        if self.final_pass is None:
            return done, None
        job = self.final_pass.take(items, done, reread)  # its outputs: partials with the live re-read shown
        return list(job.outputs), job if job.pending else None

    def drop_stream(self, stream_id: int, chunk_s: float, decoding: str) -> None:
        """Free everything NeMo holds for a stream that will never send its last chunk (abort)."""
        with torch.inference_mode():  # NeMo's buffers were created in inference mode
            self.chunk_pipeline(chunk_s, decoding).drop_stream(stream_id)
        self._biasing.pop(stream_id, None)
        if self._beam is not None:
            self._beam.drop(stream_id)
        if self.final_pass is not None:
            self.final_pass.forget(stream_id)

    def live_stream_count(self) -> int:
        """Streams with decoder state (NeMo pipeline states, audio buffers, beam states), for leak checks."""
        beam_streams = self._beam.live_stream_count() if self._beam is not None else 0
        audio = self.final_pass.stream_count() if self.final_pass is not None else 0
        pipelines = {id(p): p for p in self._pipelines.values()}.values()  # cache-aware ones are shared
        return sum(p.stream_count() for p in pipelines) + beam_streams + audio

    def warm_up(self) -> None:
        """Run one short stream through every pipeline so the first real step is not slow."""
        for index, ((chunk_s, decoding), chunk_pipeline) in enumerate(self._pipelines.items()):
            stream_id = -(index + 1)
            silence = np.zeros(chunk_pipeline.chunk_samples, dtype=np.float32)
            self.step([StepItem(stream_id, chunk_s, decoding, silence, is_first=True, is_last=False)])
            self.step([StepItem(stream_id, chunk_s, decoding, None, is_first=False, is_last=True)])
        if self.final_pass is not None:
            self.final_pass.warm_up()

    def _frame(self, chunk_pipeline: ChunkPipeline, item: StepItem) -> Any:
        from nemo.collections.asr.inference.streaming.framing.request_options import ASRRequestOptions

        options = None
        biasing = (item.model_id, item.biasing_generation)
        if item.is_first:
            options = ASRRequestOptions(biasing_cfg=_biasing_cfg(item.model_id))
        elif self._biasing.get(item.stream_id) != biasing:
            self._switch_biasing(chunk_pipeline, item.stream_id, item.model_id)
        self._biasing[item.stream_id] = biasing
        return make_frame(chunk_pipeline, item, options)

    def _switch_biasing(self, chunk_pipeline: ChunkPipeline, stream_id: int, model_id: int) -> None:
        """Point a live stream at another biasing model and restart its biasing state from the root.

        The buffered pipeline keeps the decoder state in ``state.hyp_decoding_state``; the cache-aware one in
        the previous hypothesis (whose own ``biasing_cfg`` it only refreshes while a list is set)."""
        state = chunk_pipeline.pipeline.get_state(stream_id)
        if state is None:
            raise RuntimeError(f"stream {stream_id} has no decoder state")
        biasing_cfg = _biasing_cfg(model_id)
        state.options.biasing_cfg = biasing_cfg
        hyp_state = getattr(state, "hyp_decoding_state", None)
        previous = state.get_previous_hypothesis() if hasattr(state, "get_previous_hypothesis") else None
        if previous is not None:
            previous.biasing_cfg = biasing_cfg
            hyp_state = previous.dec_state
        if hyp_state is not None and hyp_state.fusion_state_list:
            fusion_index = len(hyp_state.fusion_state_list) - 1  # the multi-model is the last fusion model
            device = hyp_state.fusion_state_list[fusion_index].device
            init = self.multi_model.get_init_states(batch_size=1, bos=True)[0]
            hyp_state.fusion_state_list[fusion_index] = init.to(device)


def final_pass_config(config: EngineConfig) -> FinalPassConfig:
    """The second pass's settings from the engine's (the bundled model file unless one is named)."""
    from captions_model.paths import FINAL_PASS_MODEL_PATH

    return FinalPassConfig(
        model=config.final_pass_model or str(FINAL_PASS_MODEL_PATH),
        beam_size=config.final_pass_beam_size,
        biasing_alpha=config.final_pass_alpha,
        max_term_deficit=config.final_pass_term_deficit,
        evidence_margin=config.biasing_evidence_margin,
        arbitration=config.final_pass_arbitration,
        refine_partials_s=config.final_pass_refine_partials_s,
    )


def _biasing_cfg(model_id: int) -> Any:
    """A fresh (never shared: NeMo mutates it) pre-registered biasing request, or None for no biasing."""
    from nemo.collections.asr.parts.context_biasing.biasing_multi_model import BiasingRequestItemConfig

    if model_id == NO_BIASING:
        return None
    return BiasingRequestItemConfig(multi_model_id=model_id, auto_manage_multi_model=False)


def _convert(result: Any) -> StepOutput:
    """A NeMo pipeline result as our step output, with repeated marks collapsed."""
    finals: tuple[Final, ...] = ()
    text = collapse_repeated_marks(result.final_transcript.strip())
    if text:
        words = tuple(
            Word(collapse_repeated_marks(segment.text.strip()), float(segment.start), float(segment.end))
            for segment in (result.final_segments or [])
            if segment.text.strip()
        )
        kept = collapse_stutter(words)  # the model's one-frame loop: "every every every everyone"
        if kept and len(kept) != len(words):
            joined = " ".join(w.text for w in kept)
            words, text = kept, capitalized(joined) if text[:1].isupper() else joined
        start_s = words[0].start_s if words else 0.0
        end_s = words[-1].end_s if words else 0.0
        finals = (Final(text=text, start_s=start_s, end_s=end_s, words=words),)
    partial = collapse_repeated_marks(" ".join(result.partial_transcript.split()))
    return StepOutput(partial=partial, finals=finals)
