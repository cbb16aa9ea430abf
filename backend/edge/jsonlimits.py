"""JSON from clients, parsed with a nesting limit and checked for text that cannot be encoded.

The standard parser recurses once per nesting level, so ``[[[[...]]]]`` kills the caller with
RecursionError (not a JSONDecodeError); a ``\\ud800`` escape yields a lone surrogate that no UTF-8
response (or database) can hold; an integer beyond 64 bits overflows the database. Each becomes a
``ClientJsonError`` naming the problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays/objects accepted from a client (our messages use at most 4)."""
MAX_JSON_INT = 2**63 - 1
"""Largest integer magnitude accepted: what a database BIGINT holds (SQLite overflows beyond it)."""

# A string is matched as runs of plain characters and escapes, each run possessive: the regex engine keeps no
# backtracking state per character (the plain alternation ``(?:[^"\\]|\\.)*`` held ~120 bytes per
# character of a long string, 1.9 GB for a 16 MB token).
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]', re.DOTALL)


class ClientJsonError(ValueError):
    """The client's JSON is malformed, too deep, or holds invalid Unicode. ``path`` names the field."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


def nesting_depth(raw: str, stop_above: int) -> int:
    """The deepest bracket nesting in ``raw`` (strings skipped), counting stops once above ``stop_above``."""
    depth = deepest = 0
    for match in _STRING_OR_BRACKET.finditer(raw):
        first = match.group()[0]
        if first in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > stop_above:
                break
        elif first in "]}":
            depth -= 1
    return deepest


def _check_text(value: Any, path: str) -> None:
    """Raise on a string (or key) that is not valid Unicode; ``value`` is at most MAX_JSON_DEPTH deep."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ClientJsonError(f"{path or 'body'}: invalid Unicode (a lone surrogate)", path) from exc
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, path)
            _check_text(item, f"{path}.{key}" if path else str(key))


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > 19 or abs(value := int(digits)) > MAX_JSON_INT:
        raise ClientJsonError(f"integer {digits[:24]} is out of range")
    return value


def loads(raw: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse client JSON; ClientJsonError when malformed, nested deeper than ``max_depth``, or when a
    string holds a lone surrogate."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ClientJsonError(f"not valid UTF-8: {exc.reason}") from exc
    if nesting_depth(raw, max_depth) > max_depth:
        raise ClientJsonError(f"JSON nested deeper than {max_depth} levels")
    try:
        value = json.loads(raw, parse_int=_bounded_int)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ClientJsonError(f"not valid JSON: {exc}") from exc
    _check_text(value, "")
    return value
