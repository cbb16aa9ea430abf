"""Thin adapter over NeMo 3.0.0's streaming inference pipelines (``nemo.collections.asr.inference``).

Everything here runs on the engine's decode thread: the pipelines are synchronous and not thread-safe.

Adapted from NeMo 3.0.0 (``BufferedRNNTPipeline``, ``RNNTInferenceWrapper``, ``PipelineBuilder`` configs):
- ``ExactChunkBufferedRNNTPipeline`` fixes the chunk rounding trap: NeMo computes ``ceil(chunk / 0.08)`` and
  ``0.56 / 0.08 == 7.000000000000001``, so a 0.56 s chunk silently became 0.64 s (1.12 s -> 1.2 s). We round,
  and size every buffer from exact sample/frame counts. It also normalises features the way the MODEL's
  preprocessor does: NeMo's buffered pipeline always applies ``per_feature`` normalisation per buffer, which
  is wrong for models trained without it (e.g. our Whisper-encoder model, ``normalize: NA``).
- ``_PreloadedRNNTWrapper`` lets several pipelines (one per chunk size) share one loaded model, and infers the
  encoder's subsampling factor when a custom encoder does not expose ``subsampling_factor``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from backend.engine.types import ENCODER_FRAME_S, SAMPLE_RATE_HZ, EngineConfig, exact_frames, exact_samples

_CONFIDENCE_CFG = {
    "exclude_blank": True,
    "aggregation": "mean",
    "method_cfg": {"name": "entropy", "entropy_type": "tsallis", "alpha": 0.5, "entropy_norm": "exp"},
}


def load_asr_model(model: str, device: str) -> Any:
    """Load any NeMo ASR model from a ``.nemo`` path or a pretrained name, in eval mode."""
    from nemo.collections.asr.models import ASRModel

    import captions_model.nemo_encoder  # noqa: F401  (allows our own encoders' ``_target_`` in .nemo configs)

    if model.endswith(".nemo"):
        asr_model = ASRModel.restore_from(model, map_location=torch.device(device))
    else:
        asr_model = ASRModel.from_pretrained(model, map_location=torch.device(device))
    return asr_model.eval()


def greedy_decoding_cfg(max_symbols: int) -> dict[str, Any]:
    """Greedy label-looping decoding with NeMo's per-stream biasing multi-model (pure PyTorch on CPU)."""
    return {
        "strategy": "greedy_batch",
        "greedy": {
            "max_symbols": max_symbols,
            "loop_labels": True,
            "use_cuda_graph_decoder": torch.cuda.is_available(),
            "enable_per_stream_biasing": True,
        },
    }


def is_cache_aware(asr_model: Any) -> bool:
    """A cache-aware streaming encoder (chunked-limited attention with look-ahead contexts)."""
    encoder = asr_model.encoder
    return (
        getattr(encoder, "att_context_style", None) == "chunked_limited"
        and hasattr(encoder, "setup_streaming_params")
        and all(context[1] >= 0 for context in getattr(encoder, "att_context_size_all", [[-1, -1]]))
    )


def _wrapper_class(cache_aware: bool) -> Any:
    if cache_aware:
        from nemo.collections.asr.inference.model_wrappers.cache_aware_rnnt_inference_wrapper import (
            CacheAwareRNNTInferenceWrapper as base,
        )
    else:
        from nemo.collections.asr.inference.model_wrappers.rnnt_inference_wrapper import (
            RNNTInferenceWrapper as base,
        )

    class _PreloadedRNNTWrapper(base):
        """NeMo's RNNT inference wrapper over an already loaded model (NeMo's loads it by name)."""

        preloaded: Any = None

        def load_model(self, model_name: str, map_location: torch.device) -> Any:
            return self.preloaded

        def get_subsampling_factor(self) -> int:
            factor = getattr(self.asr_model.encoder, "subsampling_factor", None)
            if factor is None:
                factor = _probe_subsampling_factor(self.asr_model)
            return int(factor)

    return _PreloadedRNNTWrapper


def _probe_subsampling_factor(asr_model: Any) -> int:
    """Feature frames per encoder frame, measured by encoding 1.28 s of silence (for custom encoders)."""
    samples = torch.zeros(1, round(1.28 * SAMPLE_RATE_HZ), device=asr_model.device)
    length = torch.tensor([samples.shape[1]], device=asr_model.device)
    with torch.inference_mode():
        features, feature_len = asr_model.preprocessor(input_signal=samples, length=length)
        _, encoded_len = asr_model.encoder(audio_signal=features, length=feature_len)
    return round(int(feature_len[0]) / int(encoded_len[0]))


def build_wrapper(asr_model: Any, device: str, decoding_cfg: dict[str, Any]) -> Any:
    """Wrap a loaded model for the pipelines; sets the model's decoding strategy to ``decoding_cfg``."""
    from nemo.collections.asr.inference.factory.buffered_pipeline_builder import BufferedPipelineBuilder

    wrapper_cls = _wrapper_class(is_cache_aware(asr_model))
    wrapper = wrapper_cls.__new__(wrapper_cls)
    wrapper.preloaded = asr_model
    decoding = BufferedPipelineBuilder.get_rnnt_decoding_cfg(
        OmegaConf.create({"asr": {"decoding": decoding_cfg}})
    )
    wrapper.__init__(
        model_name="preloaded",
        decoding_cfg=decoding,
        device=device.split(":")[0],
        device_id=int(device.split(":")[1]) if ":" in device else 0,
        compute_dtype="float32",
        use_amp=False,
    )
    return wrapper


def buffered_pipeline_cfg(config: EngineConfig, chunk_s: float) -> DictConfig:
    """The config fields NeMo 3.0.0's ``BufferedRNNTPipeline`` reads (no YAML ships in the wheel)."""
    return OmegaConf.create(
        {
            "asr_output_granularity": "word",
            "enable_itn": False,
            "enable_nmt": False,
            "itn": {"batch_size": 1, "n_jobs": 1, "left_padding_size": 4},
            "confidence": _CONFIDENCE_CFG,
            "endpointing": {"stop_history_eou": config.stop_history_eou_ms, "residue_tokens_at_end": 2},
            "streaming": {
                "sample_rate": SAMPLE_RATE_HZ,
                "batch_size": config.max_batch_streams,
                "word_boundary_tolerance": 4,
                "stateful": True,
                "chunk_size": chunk_s,
                "left_padding_size": config.left_context_s,
                "right_padding_size": config.right_context_s,
                "request_type": "frame",
                "padding_mode": "left",
            },
            "return_tail_result": False,
        }
    )


def _buffered_pipeline_class() -> Any:
    from nemo.collections.asr.inference.pipelines.buffered_rnnt_pipeline import BufferedRNNTPipeline

    class ExactChunkBufferedRNNTPipeline(BufferedRNNTPipeline):
        """NeMo 3.0.0 ``BufferedRNNTPipeline`` (stateful) with exact chunk, context and buffer sizes."""

        def init_parameters(self, cfg: DictConfig) -> None:
            super().init_parameters(cfg)
            stride_s = self.model_stride_in_secs
            chunk_s = cfg.streaming.chunk_size
            left_s = cfg.streaming.left_padding_size
            right_s = cfg.streaming.right_padding_size
            self.tokens_per_frame = exact_frames(chunk_s, stride_s)
            self.tokens_per_left_padding = exact_frames(left_s, stride_s)
            self.tokens_per_right_padding = exact_frames(right_s, stride_s)
            self.tokens_per_frame_float = float(self.tokens_per_frame)
            self.tokens_per_left_padding_float = float(self.tokens_per_left_padding)
            self.tokens_per_right_padding_float = float(self.tokens_per_right_padding)
            self.chunk_size, self.left_padding_size, self.right_padding_size = chunk_s, left_s, right_s
            self.buffer_size_in_secs = chunk_s + left_s + right_s
            self.expected_feature_buffer_len = exact_frames(self.buffer_size_in_secs, self.window_stride)
            self.mid_delay = self.tokens_per_frame + self.tokens_per_right_padding
            self.initial_delay = float(self.tokens_per_right_padding)
            if self.right_padding:
                raise ValueError("only left padding mode is supported")

        def preprocess(self, buffers: Any, buffer_lens: Any, expected_feature_buffer_len: int) -> Any:
            from nemo.collections.asr.parts.preprocessing.features import normalize_batch

            features, feature_lens = self.preprocessor(input_signal=buffers, length=buffer_lens)
            features = features[:, :, :expected_feature_buffer_len]
            mode = self.asr_model.asr_model_cfg.preprocessor.get("normalize", "per_feature")
            if mode in ("per_feature", "all_features"):
                features = normalize_batch(features, feature_lens, mode)[0]
            return features, feature_lens.clamp(max=features.shape[2])

        def encode_raw_signals(self, frames: Any, raw_signals: Any, left_paddings: Any) -> Any:
            """NeMo's, with the step's audio buffers staged in one pinned host tensor and copied to the GPU
            without blocking the decode thread (NeMo concatenates pageable buffers, then copies them
            synchronously); the copy runs on the decode thread's stream, before the preprocessor."""
            first = raw_signals[0] if raw_signals else None
            if first is not None and first.device.type == "cpu" and torch.device(self.device).type == "cuda":
                staging = torch.empty((len(raw_signals), *first.shape), dtype=first.dtype, pin_memory=True)
                torch.stack(raw_signals, out=staging)
                on_device = staging.to(self.device, non_blocking=True)
                raw_signals = [on_device[i] for i in range(len(raw_signals))]
            return super().encode_raw_signals(frames, raw_signals, left_paddings)

        def init_bufferer_for_buffered_streaming(self) -> None:
            super().init_bufferer_for_buffered_streaming()
            # AudioBufferer sizes its buffer with int(seconds * rate): make that exact despite float error.
            buffer_samples = exact_samples(self.buffer_size_in_secs, self.sample_rate)
            self.bufferer.buffer_size_in_secs = (buffer_samples + 0.5) / self.sample_rate

    return ExactChunkBufferedRNNTPipeline


@dataclass
class EncodedChunk:
    """One step's new encoder frames: ``encoder_output`` [B, T, D], ``lengths`` [B] (a stream's frames are
    ``encoder_output[b, :lengths[b]]``); ``delay_frames``: encoder frames between a frame's index and the
    audio it stands for (the buffered pipeline's right context; 0 for cache-aware ones)."""

    encoder_output: torch.Tensor
    lengths: torch.Tensor
    delay_frames: int


@dataclass
class ChunkPipeline:
    """One NeMo pipeline for one chunk duration; ``chunk_samples`` and ``frames_per_chunk`` are exact.

    ``att_context_size`` (cache-aware only) is the encoder look-ahead this pipeline needs: the pipelines share
    one model, so the decoder activates it before each of this pipeline's steps.
    """

    chunk_s: float
    chunk_samples: int
    frames_per_chunk: int
    pipeline: Any
    att_context_size: list[int] | None = None

    def activate(self) -> None:
        """Point the shared encoder at this pipeline's look-ahead (no-op for buffered pipelines)."""
        if self.att_context_size is not None:
            self.pipeline.asr_model.set_default_att_context_size(self.att_context_size)

    def drop_stream(self, stream_id: int) -> None:
        """Free a stream's NeMo state, audio/feature buffers and cache slot (it never sent ``is_last``)."""
        pipeline = self.pipeline
        pipeline.delete_state(stream_id)
        if self.att_context_size is None:
            pipeline.bufferer.rm_bufferer(stream_id)
            return
        slot = pipeline.bufferer.streamidx2slotidx.get(stream_id)
        if slot is not None:
            pipeline.bufferer.reset_slots([slot])
            pipeline.bufferer.free_slots([slot])
        slot = pipeline.context_manager.streamidx2slotidx.get(stream_id)
        if slot is not None:
            pipeline.context_manager._reset_slots([slot])

    def encode(self, frames: list[Any]) -> EncodedChunk:
        """Buffer and encode one frame per stream (the beam path; the greedy path's NeMo step does this
        itself): each stream's new encoder frames, whichever kind of pipeline this is."""
        if self.att_context_size is None:
            return _encode_buffered(self.pipeline, frames)
        return _encode_cache_aware(self.pipeline, frames)

    def stream_count(self) -> int:
        """Streams holding NeMo state, buffers or cache slots in this pipeline."""
        pipeline = self.pipeline
        if self.att_context_size is None:
            return len(pipeline._state_pool) + len(pipeline.bufferer.bufferers)
        return (
            len(pipeline._state_pool)
            + len(pipeline.bufferer.streamidx2slotidx)
            + len(pipeline.context_manager.streamidx2slotidx)
        )


def _encode_buffered(pipeline: Any, frames: list[Any]) -> EncodedChunk:
    """The buffered pipeline's encoder over each stream's buffer (left context, chunk, right context): the
    chunk's frames, and at the end of a stream the right context's too."""
    encoded, encoded_len = pipeline.encode_frames(frames)
    left, chunk_frames = pipeline.tokens_per_left_padding, pipeline.tokens_per_frame
    lengths = (encoded_len - left).clamp(min=0)
    is_last = torch.tensor([frame.is_last for frame in frames], device=lengths.device)
    lengths = torch.where(is_last, lengths, lengths.clamp(max=chunk_frames))
    return EncodedChunk(encoded[:, :, left:].transpose(1, 2), lengths, pipeline.tokens_per_right_padding)


def _encode_cache_aware(pipeline: Any, frames: list[Any]) -> EncodedChunk:
    """NeMo 3.0.0 ``CacheAwareRNNTPipeline.cache_aware_transcribe_step`` up to its encoder step (features,
    per-stream encoder caches in their slots, one encoder call for the streams that go on and one for those
    that end, as NeMo does: they keep all outputs), without its greedy decoding. Rows in ``frames`` order."""
    from nemo.collections.asr.inference.utils.context_manager import CacheAwareContext

    if pipeline.prompt_enabled:
        raise ValueError("beam search does not support prompt-conditioned cache-aware models")
    wrapper = pipeline.asr_model
    features, right_paddings = pipeline.bufferer.update(frames)
    drop_pre_encoded = wrapper.drop_extra_pre_encoded if pipeline.use_cache else 0
    rows: list[torch.Tensor] = [torch.empty(0)] * len(frames)
    for ending in (False, True):
        indices = [i for i, frame in enumerate(frames) if frame.is_last == ending]
        if not indices:
            continue
        paddings = [right_paddings[i] for i in indices] if ending else None
        signal, signal_len = pipeline.preprocess([features[i] for i in indices], paddings)
        stream_ids = [frames[i].stream_id for i in indices]
        context, mapping = pipeline.context_manager.get_context(stream_ids)
        encoded, encoded_len, *cache = wrapper.asr_model.encoder.cache_aware_stream_step(
            processed_signal=signal.to(wrapper.cast_dtype),
            processed_signal_length=signal_len,
            cache_last_channel=context.cache_last_channel,
            cache_last_time=context.cache_last_time,
            cache_last_channel_len=context.cache_last_channel_len,
            keep_all_outputs=ending,
            drop_extra_pre_encoded=drop_pre_encoded,
        )
        pipeline.context_manager.update_cache(stream_ids, CacheAwareContext(*cache), mapping)
        pipeline.context_manager.reset_slots(stream_ids, [ending] * len(indices))
        if pipeline.drop_left_context:
            encoded = encoded[:, :, pipeline.drop_left_context :]
            encoded_len = encoded_len - pipeline.drop_left_context
        if pipeline.valid_out_len and not ending:
            encoded = encoded[:, :, : pipeline.valid_out_len]
            encoded_len = encoded_len.clamp(max=pipeline.valid_out_len)
        for row, (i, length) in enumerate(zip(indices, encoded_len.tolist(), strict=True)):
            rows[i] = encoded[row, :, : max(0, length)].transpose(0, 1)
    lengths = torch.tensor([row.shape[0] for row in rows], device=rows[0].device)
    return EncodedChunk(torch.nn.utils.rnn.pad_sequence(rows, batch_first=True), lengths, 0)


def build_buffered_pipeline(config: EngineConfig, wrapper: Any, chunk_s: float) -> ChunkPipeline:
    """A stateful buffered pipeline over ``wrapper`` for chunks of exactly ``chunk_s`` seconds."""
    pipeline = _buffered_pipeline_class()(buffered_pipeline_cfg(config, chunk_s), wrapper)
    chunk_samples = exact_samples(pipeline.chunk_size, pipeline.sample_rate)
    if chunk_samples != exact_samples(chunk_s):
        raise RuntimeError(f"pipeline chunk is {pipeline.chunk_size} s, expected {chunk_s} s")
    return ChunkPipeline(chunk_s, chunk_samples, pipeline.tokens_per_frame, pipeline)


def cache_aware_context(asr_model: Any, chunk_s: float) -> list[int]:
    """The encoder's attention context whose look-ahead makes chunks of ``chunk_s``: right = frames - 1."""
    frames = exact_frames(chunk_s)
    for context in asr_model.encoder.att_context_size_all:
        if context[1] == frames - 1:
            return list(context)
    available = [(c[1] + 1) * ENCODER_FRAME_S for c in asr_model.encoder.att_context_size_all]
    raise ValueError(f"the cache-aware model has no look-ahead for {chunk_s} s chunks (it has {available} s)")


def build_cache_aware_pipeline(config: EngineConfig, wrapper: Any, chunk_s: float) -> ChunkPipeline:
    """NeMo 3.0.0's ``CacheAwareRNNTPipeline`` for chunks of exactly ``chunk_s`` (its encoder look-ahead)."""
    from nemo.collections.asr.inference.pipelines.cache_aware_rnnt_pipeline import CacheAwareRNNTPipeline

    context = cache_aware_context(wrapper.asr_model, chunk_s)
    cfg = buffered_pipeline_cfg(config, chunk_s)
    cfg.streaming = {
        "sample_rate": SAMPLE_RATE_HZ,
        "batch_size": config.max_batch_streams,
        "word_boundary_tolerance": 4,
        "att_context_size": context,
        "use_cache": True,
        "use_feat_cache": True,
        "chunk_size_in_secs": None,
        "request_type": "frame",
        "num_slots": max(config.max_live_streams, config.max_batch_streams),
    }
    pipeline = CacheAwareRNNTPipeline(cfg, wrapper)
    chunk_samples = exact_samples(pipeline.chunk_size_in_secs, pipeline.sample_rate)
    if chunk_samples != exact_samples(chunk_s):
        raise RuntimeError(f"cache-aware chunk is {pipeline.chunk_size_in_secs} s, expected {chunk_s} s")
    return ChunkPipeline(chunk_s, chunk_samples, pipeline.tokens_per_frame, pipeline, context)
