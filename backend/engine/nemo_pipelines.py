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
