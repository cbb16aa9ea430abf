"""What one decode step carries per stream, both ways (shared by the greedy and beam paths)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from backend.engine.types import Final

NO_BIASING = -1


@dataclass(frozen=True)
class StepItem:
    """One stream's work in a step: a chunk of exactly ``chunk_samples`` float32 samples, or (``samples``
    None) the flush that ends the stream. ``model_id`` is the stream's biasing model id (-1: none);
    a new ``biasing_generation`` (the stream's vocabulary was set again) restarts its biasing state.
    ``final_vocabulary``: the vocabulary as the second pass applies it (``final_pass.FinalVocabulary``)."""

    stream_id: int
    chunk_s: float
    decoding: str
    samples: np.ndarray | None
    is_first: bool
    is_last: bool
    model_id: int = NO_BIASING
    biasing_generation: int = 0
    final_vocabulary: Any = None


@dataclass(frozen=True)
class StepOutput:
    """What one step produced for one stream (the engine adds vocabulary matches)."""

    partial: str
    finals: tuple[Final, ...]


def make_frame(chunk_pipeline: Any, item: StepItem, options: object = None) -> Any:
    """A NeMo ``Frame`` of exactly one chunk; the flush is a chunk of zeros with valid length 0."""
    from nemo.collections.asr.inference.streaming.framing.request import Frame

    if item.samples is None:
        samples, length = torch.zeros(chunk_pipeline.chunk_samples), 0
    else:
        if item.samples.shape != (chunk_pipeline.chunk_samples,):
            raise ValueError(f"expected {chunk_pipeline.chunk_samples} samples, got {item.samples.shape}")
        samples, length = torch.from_numpy(item.samples), chunk_pipeline.chunk_samples
    return Frame(
        samples=samples,
        stream_id=item.stream_id,
        is_first=item.is_first,
        is_last=item.is_last,
        length=length,
        options=options,
    )
