"""The engine's errors: the bottom of its import graph (every engine module may import this one)."""

from __future__ import annotations

__all__ = ["EngineError", "EngineOverloaded"]


class EngineError(RuntimeError):
    """The engine cannot serve this request (not started, failed, stream closed...)."""


class EngineOverloaded(EngineError):
    """The engine is at capacity; the caller should retry later (HTTP 503 / WebSocket 1013)."""
