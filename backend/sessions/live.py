"""Live meetings on this replica: their compiled vocabularies and their streaming sessions.

A meeting's vocabulary is loaded from SQL, compiled and registered in the decoder when the meeting starts
(or when the first stream of an already-live meeting connects), BEFORE any of its audio is decoded. Every
stream of the meeting shares that one registration; it is released when the meeting ends or is idle with
no streams.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, cast

from backend.db.models import Meeting, Term
from backend.db.queries import meeting_with_terms
from backend.db.session import Database
from backend.edge.logs import get_logger
from backend.engine.contract import CaptionEngine, VocabularyRef
from backend.meeting_view.feed import MeetingFeed
from backend.sessions.resume import ResumesInProgress
from backend.text.vocab import EffectiveVocabulary, VocabularyTerm

log = get_logger(__name__)
Decoding = Literal["greedy", "beam"]


def decoding(stored: str) -> Decoding:
    """A meeting's stored decoding mode (the API admits only these two)."""
    if stored not in ("greedy", "beam"):
        raise ValueError(f"unknown decoding {stored!r}")
    return cast(Decoding, stored)


def terms_of(rows: Sequence[Term]) -> list[VocabularyTerm]:
    """Stored (already validated) term rows as compile inputs."""
    return [
        VocabularyTerm(text=t.text, weight=t.weight, display=t.display, alternates=tuple(t.alternates or ()))
        for t in rows
    ]


@dataclass
class SessionSlots:
    """Slots held on this replica, in total and per user (event-loop thread only)."""

    per_user: Counter[int] = field(default_factory=Counter)
    total: int = 0

    def try_take(self, user_id: int, max_total: int, max_per_user: int) -> bool:
        """Take one slot for ``user_id`` unless a cap is reached; True when taken."""
        if self.total >= max_total or self.per_user[user_id] >= max_per_user:
            return False
        self.total += 1
        self.per_user[user_id] += 1
        return True

    def release(self, user_id: int) -> None:
        """Give back a slot taken by ``try_take``."""
        self.total -= 1
        self.per_user[user_id] -= 1
        if self.per_user[user_id] <= 0:
            del self.per_user[user_id]


@dataclass
class ViewerSlots:
    """Meeting-view sockets held on this replica: in total, per view-only link and per client address
    (event-loop thread only). Taken at the handshake, in the same step as the check, and given back when the
    socket's handler returns, like ``SessionSlots``."""

    total: int = 0
    per_link: Counter[int] = field(default_factory=Counter)
    per_client: Counter[str] = field(default_factory=Counter)

    def try_take(self, link_id: int | None, client: str, caps: tuple[int, int, int]) -> str | None:
        """Take a slot unless a cap is reached: None when taken, else the cap that refused ("replica",
        "link" or "client"). ``caps``: (per replica, per link, per client address)."""
        per_replica, per_link, per_client = caps
        if self.total >= per_replica:
            return "replica"
        if link_id is not None and self.per_link[link_id] >= per_link:
            return "link"
        if self.per_client[client] >= per_client:
            return "client"
        self.total += 1
        self.per_client[client] += 1
        if link_id is not None:
            self.per_link[link_id] += 1
        return None

    def release(self, link_id: int | None, client: str) -> None:
        """Give back a slot taken by ``try_take``."""
        self.total -= 1
        self.per_client[client] -= 1
        if self.per_client[client] <= 0:
            del self.per_client[client]
        if link_id is not None:
            self.per_link[link_id] -= 1
            if self.per_link[link_id] <= 0:
                del self.per_link[link_id]


class LiveSession(Protocol):
    """What the hub and the live-sessions API need of a streaming session
    (``backend.sessions.ws.CaptionSession``)."""

    session_id: str
    resume_token_hash: str
    meeting_id: int
    api_token_id: int | None
    username: str
    chunk_s: float
    partials: int
    finals: int
    started_at: datetime
    started_monotonic: float
    live: LiveMeeting | None

    @property
    def lag_s(self) -> float: ...

    @property
    def overdue_s(self) -> float:
        """The lag beyond a resumed client's backlog still draining (what readiness judges)."""
        ...

    async def end(self, code: int, reason: str, error_code: str | None = None) -> None:
        """Flush, persist, tell ``error_code`` if given, close with ``code`` (drain, meeting end, an admin, a
        newer connection, a revoked API token)."""
        ...

    def shed(self) -> None:
        """The degradation ladder's top rung: close this session busy (1013) after the chunk being decoded,
        its finals flushed and persisted, the audio it still holds not decoded (its page resumes later)."""
        ...

    def tell_load(self, load: dict[str, Any]) -> None:
        """Send the replica's load (``backend.sessions.ladder.LoadLadder.snapshot``) as a ``load`` message."""
        ...

    async def meeting_vocabulary_changed(self) -> None:
        """Switch to the meeting's re-applied vocabulary between steps."""
        ...


@dataclass
class LiveMeeting:
    """One live meeting on this replica. ``handle`` is the decoder registration shared by its streams."""

    meeting_id: int
    title: str
    kind: str
    chunk_s: float
    decoding: Decoding
    vocabulary: EffectiveVocabulary
    handle: VocabularyRef | None = None
    sessions: set[LiveSession] = field(default_factory=set)

    @property
    def version(self) -> str:
        return self.vocabulary.version_key()


class LiveHub:
    """Registry of live meetings and sessions; all methods run on the event loop.

    ``_locks`` serialises opening/re-compiling one meeting so two streams joining at once share one
    compile; ``sessions`` holds every streaming session (for lag, /api/live and drain); ``slots`` counts
    admitted sockets for the capacity caps (``backend.sessions.admission``), ``viewer_slots`` the
    meeting-view sockets; ``resumes`` the resumes in progress.
    """

    def __init__(
        self, db: Database, engine: CaptionEngine, engine_started: Callable[[], Awaitable[None]]
    ) -> None:
        self._db = db
        self._engine = engine
        self._engine_started = engine_started
        self.meetings: dict[int, LiveMeeting] = {}
        self.sessions: dict[str, LiveSession] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.slots = SessionSlots()
        self.viewer_slots = ViewerSlots()
        self.resumes = ResumesInProgress()
        self.draining = False
        self.feed = MeetingFeed(db)  # the meeting view's fan-out (backend.meeting_view.viewer_ws)
        self._endings: set[asyncio.Task[None]] = set()  # sessions being ended without a caller waiting

    async def _load(self, meeting_id: int) -> tuple[Meeting, EffectiveVocabulary]:
        async with self._db.session() as db:
            meeting = await meeting_with_terms(db, meeting_id)
            if meeting is None:
                raise LookupError(f"meeting {meeting_id} does not exist")
            terms = [t for v in meeting.vocabularies for t in terms_of(v.terms)]
        return meeting, EffectiveVocabulary.from_terms(terms)

    async def open_meeting(self, meeting_id: int) -> LiveMeeting:
        """The live meeting, loading and registering its vocabulary first if this replica lacks it."""
        async with self._locks.setdefault(meeting_id, asyncio.Lock()):
            live = self.meetings.get(meeting_id)
            if live is not None:
                return live
            meeting, vocabulary = await self._load(meeting_id)
            handle = await self.compile(vocabulary)
            live = LiveMeeting(
                meeting_id=meeting.id,
                title=meeting.title,
                kind=meeting.kind.value,
                chunk_s=meeting.chunk_ms / 1000,
                decoding=decoding(meeting.decoding),
                vocabulary=vocabulary,
                handle=handle,
            )
            self.meetings[meeting_id] = live
            log.info("meeting_opened", meeting_id=meeting_id, terms=len(vocabulary.entries))
            return live

    async def compile(self, vocabulary: EffectiveVocabulary) -> VocabularyRef | None:
        """Compile and register a vocabulary in the decoder (None for an empty one)."""
        if not vocabulary.entries:
            return None
        await self._engine_started()
        return await self._engine.load_vocabulary(vocabulary.bias_terms())

    async def apply_vocabulary(self, meeting_id: int) -> LiveMeeting | None:
        """Re-read a live meeting's vocabularies and switch every stream to the new registration."""
        async with self._locks.setdefault(meeting_id, asyncio.Lock()):
            live = self.meetings.get(meeting_id)
            if live is None:
                return None
            _meeting, vocabulary = await self._load(meeting_id)
            handle = await self.compile(vocabulary)
            old = live.handle
            live.vocabulary, live.handle = vocabulary, handle
            for session in list(live.sessions):
                await session.meeting_vocabulary_changed()
            if old is not None:
                old.release()
            return live

    async def close_meeting(self, meeting_id: int, reason: str, error_code: str | None = None) -> None:
        """End every stream of the meeting (their finals are persisted; the client told ``error_code`` if
        given, e.g. ``meeting_deleted``) and release its registration; then the meeting view's viewers on
        every replica re-read the meeting (its end)."""
        live = self.meetings.get(meeting_id)
        streams = {s for s in self.sessions.values() if s.meeting_id == meeting_id}
        if live is not None:
            streams |= live.sessions
        await asyncio.gather(*(s.end(1000, reason, error_code) for s in streams))
        if live is not None:
            self._forget(live)
        self.feed.meeting_changed(meeting_id)

    def join(self, session: LiveSession, live: LiveMeeting) -> None:
        live.sessions.add(session)
        self.sessions[session.session_id] = session

    def leave(self, session: LiveSession, live: LiveMeeting) -> None:
        live.sessions.discard(session)
        if self.sessions.get(session.session_id) is session:  # not a later connection of the same session
            del self.sessions[session.session_id]

    def _forget(self, live: LiveMeeting) -> None:
        if self.meetings.get(live.meeting_id) is live:
            del self.meetings[live.meeting_id]
        if live.handle is not None:
            live.handle.release()
            live.handle = None

    def api_token_ids(self) -> set[int]:
        """The API tokens whose tickets opened the sockets live here (speakers and viewers)."""
        speaking = {s.api_token_id for s in self.sessions.values() if s.api_token_id is not None}
        return speaking | self.feed.api_token_ids()

    def end_for_token(self, api_token_id: int) -> None:
        """The API token was revoked or expired: end every socket its tickets opened here (finals flushed,
        ``error`` ``token_revoked``, close 1008), without waiting for them."""
        for session in list(self.sessions.values()):
            if session.api_token_id == api_token_id:
                task = asyncio.create_task(session.end(1008, "API token revoked", "token_revoked"))
                self._endings.add(task)
                task.add_done_callback(self._endings.discard)
        self.feed.refuse_token(api_token_id)

    def max_lag_s(self) -> float:
        return max((s.lag_s for s in self.sessions.values()), default=0.0)

    def max_overdue_s(self) -> float:
        """The largest lag not explained by a resume's backlog: a replica catching up after a crash stays
        ready for the other resumes."""
        return max((s.overdue_s for s in self.sessions.values()), default=0.0)

    async def drain(self, timeout_s: float) -> None:
        """Shutdown: no new sessions; each live one is told to reconnect, flushed, persisted, closed 1012."""
        self.draining = True
        sessions = list(self.sessions.values())
        log.info("drain_started", sessions=len(sessions))
        if sessions:
            await asyncio.wait(
                [asyncio.ensure_future(s.end(1012, "server restarting")) for s in sessions], timeout=timeout_s
            )
        for live in list(self.meetings.values()):
            self._forget(live)
        await self.feed.close()
        log.info("drain_finished")
