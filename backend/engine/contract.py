"""What the service needs of a caption engine: the batched NeMo ``Engine`` and the web layer's test double
both satisfy these protocols (checked by mypy in ``make test``), so the service is typed against them and
never against one implementation.

Ownership: the service owns the engine (``start``/``stop``); a session owns its stream (one ``push`` or
``finish`` in flight, then ``abort`` if it leaves early) and its vocabulary handle (``release`` once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from backend.engine.types import EngineStats, StepResult, StreamOptions, VocabularyRef

__all__ = ["CaptionEngine", "CaptionStream", "VocabularyRef"]


class CaptionStream(Protocol):
    """One client's audio stream: exact chunks in, partial and finals out."""

    async def push(self, pcm: bytes) -> StepResult:
        """Decode one chunk of PCM16 little-endian audio (``chunk_samples`` samples)."""
        ...

    async def finish(self) -> StepResult:
        """Flush the end of the stream as finals and close it."""
        ...

    async def set_vocabulary(self, handle: Any) -> None:
        """Use ``handle`` (a ``VocabularyRef`` of the same engine, or None) from the next chunk on."""
        ...

    def abort(self) -> None:
        """Close without finals (the client left); idempotent."""
        ...


class CaptionEngine(Protocol):
    """Every live stream on one decoder."""

    second_pass_enabled: bool
    """False: new finals keep the streaming pass's text (the service's degradation ladder sets it)."""

    @property
    def ready(self) -> bool:
        """Started, warm and not failed: the service is ready only while this is true."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (validates vocabulary terms), or None before ``start``."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def chunk_samples(self, chunk_s: float) -> int:
        """Samples in one chunk of ``chunk_s`` seconds; ValueError for a chunk size the engine won't run."""
        ...

    def stats(self) -> EngineStats: ...

    async def load_vocabulary(self, terms: Sequence[Any]) -> VocabularyRef:
        """Compile and register ``terms`` (raises ``biasing.terms.TermValidationError`` for bad ones)."""
        ...

    def open_stream(self, options: StreamOptions) -> CaptionStream: ...
