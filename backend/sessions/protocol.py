"""WebSocket protocol v1's vocabulary (docs/protocol.md): a session's states and legal transitions, and the
audio a client says it holds at ``start``. The violation that closes a socket and how a client's text frame
is read are every socket's (``backend.edge.websocket``)."""

from __future__ import annotations

import enum
from typing import Any

from backend.edge.websocket import ProtocolViolation

__all__ = [
    "ALLOWED_TRANSITIONS",
    "SessionState",
    "check_held_audio",
    "held_audio",
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


INPUT_LEVEL_MESSAGES = {
    "quiet": "Your microphone is very quiet: move closer to it or turn its input level up.",
    "loud": "Your microphone is too loud and clipping: turn its input level down.",
    "ok": "",
}
"""The ``input_level`` message's sentence for the speaker's page, by state."""
