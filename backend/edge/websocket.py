"""What every socket of ours shares at the edge: the violation that closes a socket with a code, and how a
client's text frame is read (bounded JSON, an object)."""

from __future__ import annotations

from typing import Any

from backend.edge import jsonlimits


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
