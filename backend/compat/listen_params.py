"""The query parameters of Deepgram's ``/v1/listen`` that this server honours, checked before accept: a
value it cannot honour is refused (HTTP 400 naming the parameter), never silently ignored. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["IGNORED", "ListenError", "ListenParams", "parse_listen"]


class Query(Protocol):
    """Starlette's ``QueryParams``: a mapping with every value of a repeated key."""

    def getlist(self, key: str) -> list[str]: ...

    def keys(self) -> Any: ...


class ListenError(ValueError):
    """A parameter this server refuses; the message names it and says what is accepted."""


IGNORED = frozenset(
    {"model", "version", "tag", "mip_opt_out", "numerals", "profanity_filter", "filler_words"}
)
"""Accepted and without effect: there is one English model (``model``/``version``); tags and opt-outs have
nothing to act on here."""
KNOWN = IGNORED | {
    "encoding",
    "sample_rate",
    "channels",
    "multichannel",
    "interim_results",
    "punctuate",
    "smart_format",
    "endpointing",
    "utterance_end_ms",
    "vad_events",
    "keyterm",
    "keywords",
    "language",
    "diarize",
    "dictation",
}
MAX_ENDPOINTING_MS = 10_000


@dataclass(frozen=True)
class ListenParams:
    """What a ``/v1/listen`` client asked for (times in ms; ``keywords`` carry their boost as weight)."""

    sample_rate: int = 16000
    interim_results: bool = False
    punctuate: bool = False
    smart_format: bool = False
    endpointing_ms: int | None = None
    utterance_end_ms: int | None = None
    vad_events: bool = False
    keyterms: tuple[str, ...] = ()
    keywords: tuple[tuple[str, float], ...] = field(default=())

    def term_items(self) -> list[Any]:
        """The stream's vocabulary as ``configure`` items (validated like a session's terms)."""
        return [*self.keyterms, *({"text": word, "weight": boost} for word, boost in self.keywords)]


def _one(query: Query, name: str) -> str | None:
    values = query.getlist(name)
    if len(values) > 1:
        raise ListenError(f"{name}: given more than once")
    return values[0] if values else None


def _flag(query: Query, name: str) -> bool:
    value = _one(query, name)
    if value is None:
        return False
    if value.lower() not in ("true", "false"):
        raise ListenError(f"{name}: true or false, got {value!r}")
    return value.lower() == "true"


def _int(query: Query, name: str, low: int, high: int) -> int | None:
    value = _one(query, name)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or not low <= int(value) <= high:
        raise ListenError(f"{name}: an integer from {low} to {high}, got {value!r}")
    return int(value)


def _keywords(values: Sequence[str]) -> tuple[tuple[str, float], ...]:
    parsed = []
    for value in values:
        word, sep, boost = value.rpartition(":")
        if not sep:
            word, boost = value, "1"
        try:
            weight = float(boost)
        except ValueError as exc:
            raise ListenError(f"keywords: word:boost with a number boost, got {value!r}") from exc
        parsed.append((word, weight))
    return tuple(parsed)


def parse_listen(query: Query) -> ListenParams:
    """The parameters of one ``/v1/listen`` handshake; ``ListenError`` for a value we cannot honour."""
    unknown = sorted(set(query.keys()) - KNOWN)
    if unknown:
        raise ListenError(f"{unknown[0]}: not supported by this server (docs/protocol.md lists what is)")
    encoding = _one(query, "encoding") or "linear16"
    if encoding != "linear16":
        raise ListenError(f"encoding: only linear16 (PCM16 little-endian) is supported, got {encoding!r}")
    rate = _int(query, "sample_rate", 1, 192_000)
    if rate is not None and rate != 16000:
        raise ListenError(f"sample_rate: only 16000 is supported, got {rate}")
    channels = _int(query, "channels", 1, 64)
    if (channels is not None and channels != 1) or _flag(query, "multichannel"):
        raise ListenError("channels: only mono (channels=1) is supported")
    language = _one(query, "language")
    if language is not None and language.lower().split("-")[0] != "en":
        raise ListenError(f"language: only English (en) is supported, got {language!r}")
    if _flag(query, "diarize") or _flag(query, "dictation"):
        raise ListenError("diarize and dictation are not supported")
    endpointing = _one(query, "endpointing")
    endpointing_ms = None
    if endpointing is not None and endpointing.lower() != "false":
        endpointing_ms = _int(query, "endpointing", 10, MAX_ENDPOINTING_MS)
    utterance_end_ms = _int(query, "utterance_end_ms", 1000, 5000)
    interim = _flag(query, "interim_results")
    if utterance_end_ms is not None and not interim:
        raise ListenError("utterance_end_ms needs interim_results=true")
    smart = _flag(query, "smart_format")
    return ListenParams(
        sample_rate=16000,
        interim_results=interim,
        punctuate=_flag(query, "punctuate") or smart,
        smart_format=smart,
        endpointing_ms=endpointing_ms,
        utterance_end_ms=utterance_end_ms,
        vad_events=_flag(query, "vad_events"),
        keyterms=tuple(query.getlist("keyterm")),
        keywords=_keywords(query.getlist("keywords")),
    )
