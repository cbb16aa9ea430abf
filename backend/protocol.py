"""WebSocket protocol v1's vocabulary (docs/protocol.md): a session's states and legal transitions, the
violation that ends a session with a close code, and how a client's text frame is read."""

from __future__ import annotations

import enum
from typing import Any

from backend import jsonlimits

__all__ = [
    "ALLOWED_TRANSITIONS",
    "ProtocolViolation",
    "SessionState",
    "check_held_audio",
    "held_audio",
    "parse_json",
]


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


def held_audio(message: dict[str, Any]) -> tuple[float | None, float | None]:
    """``start``'s ``audio_s`` (the end of the audio the client has captured for this session) and
    ``buffered_from_s`` (the oldest audio it can still send), both on the session's clock; None if absent."""
    values = []
    for key in ("audio_s", "buffered_from_s"):
        value = message.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e7
        ):
            raise ProtocolViolation(1008, f"{key} must be a number of seconds >= 0")
        values.append(None if value is None else float(value))
    audio_s, buffered_from_s = values
    if buffered_from_s is not None and (audio_s is None or buffered_from_s > audio_s):
        raise ProtocolViolation(1008, "buffered_from_s needs audio_s and must not exceed it")
    return audio_s, buffered_from_s


def check_held_audio(audio_s: float | None, age_s: float, slack_s: float) -> None:
    """A session's clock runs no faster than the wall clock: ``audio_s`` beyond the session's age (0 for a
    new one) plus ``slack_s`` (audio held from before, a burst) is refused, so a client cannot move a
    session's clock, and the meeting's timeline with it, by months (issue 36)."""
    if audio_s is not None and audio_s > age_s + slack_s:
        raise ProtocolViolation(
            1008, f"audio_s {audio_s:.2f} is more audio than this session can have ({age_s + slack_s:.2f} s)"
        )
