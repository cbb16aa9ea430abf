"""What one streaming session boosts and renders: its meeting's vocabulary, plus the extra terms its client
sent with ``configure`` (compiled and registered for this session alone, released when it ends)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from backend.engine.contract import CaptionStream, VocabularyRef
from backend.sessions.live import LiveMeeting
from backend.text.termforms import check_forms
from backend.text.vocab import (
    EffectiveVocabulary,
    ItemError,
    VocabularyTerm,
    parse_term_items,
    validate_terms,
)
from biasing.terms import TermLimits

__all__ = ["SessionVocabulary", "TooManyTerms", "validate_session_terms"]

Compile = Callable[[EffectiveVocabulary], Awaitable[VocabularyRef | None]]


class TooManyTerms(ValueError):
    """More extra terms than a session may add."""


def validate_session_terms(
    items: Any, max_terms: int, limits: TermLimits, tokenizer: Any
) -> tuple[list[VocabularyTerm], list[ItemError]]:
    """A ``configure`` message's terms: the valid ones, and every rejected one with its index and reason
    (``TooManyTerms`` beyond ``max_terms``)."""
    parsed, errors = parse_term_items(items)
    if len(parsed) + len(errors) > max_terms:
        raise TooManyTerms(f"at most {max_terms} extra terms per session")
    well_formed, malformed = check_forms(parsed, limits)
    valid, bad = validate_terms(well_formed, limits, tokenizer)
    errors += malformed + bad
    return [term for _, term in valid], sorted(errors, key=lambda e: e.position)


class SessionVocabulary:
    """The session's effective vocabulary (``current``) and its own registration, if it has extra terms.

    ``compile`` registers a vocabulary in the engine (the hub's, shared with the meeting's compile path)."""

    def __init__(self, compile_vocabulary: Compile) -> None:
        self.current = EffectiveVocabulary()
        self._compile = compile_vocabulary
        self._extra: EffectiveVocabulary | None = None
        self._own: VocabularyRef | None = None
        self.handle: VocabularyRef | None = None  # the registration ``current`` is decoded with

    def start(self, live: LiveMeeting) -> None:
        """At the session's start: the meeting's vocabulary (already registered by the hub)."""
        self.current = live.vocabulary
        self.handle = live.handle

    async def configure(
        self, extra: list[VocabularyTerm], live: LiveMeeting, stream: CaptionStream | None
    ) -> None:
        """Replace the session's extra terms and switch the stream to meeting + extra from its next chunk."""
        self._extra = EffectiveVocabulary.from_terms(extra)
        await self.rebuild(live, stream)

    async def rebuild(self, live: LiveMeeting, stream: CaptionStream | None) -> None:
        """Recompute meeting + extra (the meeting's vocabulary may have changed); point the stream at it."""
        if self._extra is None or not self._extra.entries:
            merged, handle, own = live.vocabulary, live.handle, None
        else:
            merged = live.vocabulary.merged_with(self._extra)
            own = handle = await self._compile(merged)
        if stream is not None:
            await stream.set_vocabulary(handle)
        self.release()
        self._own = own
        self.current, self.handle = merged, handle

    def release(self) -> None:
        """Give back the session's own registration (idempotent)."""
        if self._own is not None:
            self._own.release()
            self._own = None
