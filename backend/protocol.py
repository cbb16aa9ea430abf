"""WebSocket protocol v1's vocabulary (docs/protocol.md): a session's states and legal transitions, the
violation that ends a session with a close code, and how a client's text frame is read."""

from __future__ import annotations

import enum
from typing import Any

from backend import jsonlimits

__all__ = ["ALLOWED_TRANSITIONS", "ProtocolViolation", "SessionState", "parse_json"]


class SessionState(enum.Enum):
    """connecting -> authenticated -> streaming -> draining -> closed (any state may close)."""

    CONNECTING = "connecting"
    AUTHENTICATED = "authenticated"
    STREAMING = "streaming"
    DRAINING = "draining"
    CLOSED = "closed"


ALLOWED_TRANSITIONS = {
    SessionState.CONNECTING: {SessionState.AUTHENTICATED, SessionState.CLOSED},
    SessionState.AUTHENTICATED: {SessionState.STREAMING, SessionState.CLOSED},
    SessionState.STREAMING: {SessionState.DRAINING, SessionState.CLOSED},
    SessionState.DRAINING: {SessionState.CLOSED},
    SessionState.CLOSED: set(),
}


class ProtocolViolation(Exception):
    """The client broke the protocol; the session closes with ``code``."""

    def __init__(self, code: int, message: str, error_code: str = "protocol") -> None:
        super().__init__(message)
        self.code = code
        self.error_code = error_code


def parse_json(raw: str, max_depth: int = jsonlimits.MAX_JSON_DEPTH) -> dict[str, Any]:
    """A client's text frame as a JSON object; ``ProtocolViolation`` (1008) for anything else."""
    try:
        message = jsonlimits.loads(raw, max_depth)
    except jsonlimits.ClientJsonError as exc:
        raise ProtocolViolation(1008, f"text frames must be JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolViolation(1008, "text frames must be JSON objects")
    return message
