"""The meeting view's data on this replica: who is speaking, a viewer's bounded queue, a meeting's channel
of viewers, the numbering that keeps a final from reaching a viewer twice, and a final as it crosses
replicas on the bus. Fan-out is ``backend.meeting_view.feed``'s; reading SQL is ``catch_up``'s."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.db.models import CaptionSegment
from backend.meeting_view.timeline import MeetingClock

VIEWER_QUEUE_MAX = 256
"""Events one viewer may have waiting; partials are skipped from half of it, a final beyond it drops the
viewer."""


class Speaking(Protocol):
    """What the feed reads of a caption session (``backend.sessions.ws.CaptionSession``)."""

    session_id: str
    meeting_id: int
    user_id: int
    utterance: int


class Connected(Speaking, Protocol):
    """A caption session's connection: a resume takes the session's next ``generation``."""

    generation: int


SPEAKER_STATES = ("live", "reconnecting", "stopped")
"""A speaking session's status as its meeting's viewers see it (``publish_status``)."""


@dataclass(frozen=True)
class SpeakerStatus:
    """Where one speaking session stands: ``live``, ``reconnecting`` (its client vanished without ``stop``;
    the resume window is open) or ``stopped``. ``generation`` is the connection's (a resume takes the next),
    so a late word from a superseded connection does not undo a newer one's."""

    session_id: str
    user_id: int
    generation: int
    state: str
    local: bool = True  # published by a session on this replica (else heard on the bus)


@dataclass(frozen=True)
class Partial:
    """A speaker's tentative text for ``utterance``; empty text clears it."""

    session_id: str
    user_id: int
    utterance: int
    text: str


class SeqTracker:
    """The caption numbers of one stream already handled: all up to ``watermark``, plus ``above`` it.
    A stream numbers its captions 1, 2, 3... without gaps, so the set stays small."""

    def __init__(self, watermark: int = 0) -> None:
        self.watermark = watermark
        self.above: set[int] = set()

    def add(self, seq: int) -> bool:
        """Record ``seq``; True when it is new."""
        if seq <= self.watermark or seq in self.above:
            return False
        self.above.add(seq)
        while self.watermark + 1 in self.above:
            self.watermark += 1
            self.above.discard(self.watermark)
        return True

    def skip_to(self, seq: int) -> None:
        """Count every caption up to ``seq`` as handled (they were read from SQL elsewhere)."""
        self.watermark = max(self.watermark, seq)
        self.above = {s for s in self.above if s > self.watermark}
        while self.watermark + 1 in self.above:
            self.watermark += 1
            self.above.discard(self.watermark)


class Viewer:
    """One viewer socket's queue of events (event-loop only). ``dropped`` once a final did not fit; then
    the socket must close, nothing more is queued."""

    def __init__(
        self, meeting_id: int, max_queued: int, link_id: int | None = None, api_token_id: int | None = None
    ) -> None:
        self.meeting_id = meeting_id
        self.link_id = link_id
        self.api_token_id = api_token_id
        self.max_queued = max_queued
        self.dropped = False
        self.skipped_partials = 0
        self.seen: dict[str, SeqTracker] = {}
        self.expiry: asyncio.TimerHandle | None = None  # closes a link's view when the link expires
        self._events: deque[tuple[str, Any]] = deque()
        self._wake = asyncio.Event()

    def offer(self, kind: str, payload: Any) -> None:
        """Queue an event without waiting: a partial is skipped when the queue is half full, any other
        event that does not fit drops the viewer."""
        if self.dropped:
            return
        if kind == "partial" and len(self._events) >= self.max_queued // 2:
            self.skipped_partials += 1
            return
        if len(self._events) >= self.max_queued:
            self.dropped = True
            self._events.clear()
        else:
            self._events.append((kind, payload))
        self._wake.set()

    async def next(self) -> list[tuple[str, Any]]:
        """Every queued event, waiting for one; [] once dropped."""
        while not self._events and not self.dropped:
            self._wake.clear()
            await self._wake.wait()
        events = list(self._events)
        self._events.clear()
        return events

    def mark_seen(self, session_id: str, seq: int) -> bool:
        """True the first time this viewer handles this final (its history and the live feed overlap)."""
        return self.seen.setdefault(session_id, SeqTracker()).add(seq)

    @property
    def queued(self) -> int:
        return len(self._events)


@dataclass
class Channel:
    """A meeting with viewers on this replica: its viewers, its clock as last read, the finals already
    fanned out per stream, and its SQL poller (SQLite) or its bus subscription and SQL reads (PostgreSQL).
    ``lock`` serialises reads of the clock."""

    meeting_id: int
    viewers: set[Viewer] = field(default_factory=set)
    clock: MeetingClock | None = None
    published: dict[str, SeqTracker] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    poller: asyncio.Task[None] | None = None
    syncing: asyncio.Task[None] | None = None
    sync_again: bool = False
    ended: bool = False

    def broadcast(self, kind: str, payload: Any) -> None:
        for viewer in self.viewers:
            viewer.offer(kind, payload)


def final_fields(segment: CaptionSegment) -> dict[str, Any]:
    """What a viewer on another replica needs of a stored final (its bus event; ``segment_of`` reverses)."""
    return {
        "id": segment.id,
        "t": segment.text,
        "a": segment.start_s,
        "b": segment.end_s,
        "mt": list(segment.matched_terms or []),
    }


def segment_of(meeting_id: int, event: dict[str, Any]) -> CaptionSegment:
    """The (unsaved) final of a bus event ``{"k": "f", "s", "q", ...final_fields}``."""
    return CaptionSegment(
        id=int(event["id"]),
        meeting_id=meeting_id,
        session_id=str(event["s"]),
        seq=int(event["q"]),
        text=str(event["t"]),
        start_s=float(event["a"]),
        end_s=float(event["b"]),
        words=[],
        matched_terms=list(event.get("mt") or []),
    )
