"""Streaming engine: every live caption stream decoded on one NeMo Transducer with continuous batching,
per-stream vocabulary biasing, exact 0.56 s / 1.12 s chunks."""

from backend.engine.engine import Engine
from backend.engine.errors import EngineError, EngineOverloaded
from backend.engine.stream import EngineStream, StreamStatus
from backend.engine.types import (
    EngineConfig,
    EngineStats,
    Final,
    StepResult,
    StreamOptions,
    Word,
)
from backend.engine.vocabulary import VocabularyHandle

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineOverloaded",
    "EngineStats",
    "EngineStream",
    "Final",
    "StepResult",
    "StreamOptions",
    "StreamStatus",
    "VocabularyHandle",
    "Word",
]
