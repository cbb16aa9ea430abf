"""Fan-out of a meeting's live captions to its viewers (the read-only meeting view, ``backend.viewer_ws``).

Publishing never waits: a caption session calls ``publish_partial`` / ``publish_final`` (plain function
calls on the event loop), which append to each viewer's bounded queue and return. A viewer that falls
behind first skips partials (they are replaced anyway); a final that does not fit drops the viewer, whose
socket then closes 1013 ``too_slow`` (its page reconnects and reloads the meeting from SQL). A slow viewer
therefore costs the speakers nothing.

Several replicas share one database but not this process: a stream on another replica never publishes
here. So each meeting with viewers on this replica has one poller that reads SQL every ``poll_s`` for
finals this replica has not published (by stream and caption number), and for speaker renames and the
meeting's end. Finals from any replica reach every viewer within about ``poll_s``; partials only reach the
viewers on the speaker's own replica.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from backend.db.models import CaptionSegment, ViewerLink, utcnow
from backend.db.session import Database
from backend.logs import get_logger
from backend.meeting_timeline import MeetingClock, read_clock, segments_after

log = get_logger(__name__)

POLL_S = 1.5
"""How often a meeting with viewers here reads SQL for finals stored by other replicas, seconds."""
VIEWER_QUEUE_MAX = 256
"""Events one viewer may have waiting; partials are skipped from half of it, a final beyond it drops the
viewer."""
ENDED_GRACE_S = 10.0
"""After a meeting ends, how long viewers wait for streams that never recorded their end (a crashed
replica) before they are told it ended."""


class Speaking(Protocol):
    """What the feed reads of a caption session (``backend.ws.CaptionSession``)."""

    session_id: str
    meeting_id: int
    user_id: int
    utterance: int


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
    fanned out per stream, and its SQL poller. ``lock`` serialises reads of the clock."""

    meeting_id: int
    viewers: set[Viewer] = field(default_factory=set)
    clock: MeetingClock | None = None
    published: dict[str, SeqTracker] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    poller: asyncio.Task[None] | None = None
    ended: bool = False

    def broadcast(self, kind: str, payload: Any) -> None:
        for viewer in self.viewers:
            viewer.offer(kind, payload)


class MeetingFeed:
    """Per-meeting publish/subscribe of live captions on this replica (event-loop thread only)."""

    def __init__(
        self,
        db: Database,
        poll_s: float = POLL_S,
        max_queued: int = VIEWER_QUEUE_MAX,
    ) -> None:
        self._db = db
        self.poll_s = poll_s
        self.max_queued = max_queued
        self.channels: dict[int, Channel] = {}

    @property
    def viewers(self) -> int:
        return sum(len(c.viewers) for c in self.channels.values())

    # ----- publishing (from caption sessions; never waits) -------------------------------------------------
    def publish_partial(self, session: Speaking, text: str) -> None:
        """A session's new partial text, to the meeting's viewers here (skipped by slow ones)."""
        channel = self.channels.get(session.meeting_id)
        if channel is not None:
            channel.broadcast(
                "partial", Partial(session.session_id, session.user_id, session.utterance, text)
            )

    def publish_final(self, session: Speaking, segment: CaptionSegment) -> None:
        """A stored final (``segment``, already persisted), to the meeting's viewers here."""
        channel = self.channels.get(session.meeting_id)
        if channel is None:
            return
        if channel.published.setdefault(segment.session_id, SeqTracker()).add(segment.seq):
            channel.broadcast("final", segment)

    # ----- subscribing (from viewer sockets) --------------------------------------------------------------
    async def subscribe(
        self, meeting_id: int, link_id: int | None = None, api_token_id: int | None = None
    ) -> tuple[Viewer, Channel]:
        """A queue for a new viewer (admitted by viewer link ``link_id``, or by a ticket asked for with API
        token ``api_token_id``), registered BEFORE it reads the meeting's history (so nothing stored in
        between is missed; the viewer skips what it saw twice)."""
        channel = self.channels.get(meeting_id)
        if channel is None:
            channel = self.channels[meeting_id] = Channel(meeting_id)
            channel.poller = asyncio.create_task(self._poll(channel), name=f"meeting-feed-{meeting_id}")
        viewer = Viewer(meeting_id, self.max_queued, link_id, api_token_id)
        channel.viewers.add(viewer)
        await channel.ready.wait()
        return viewer, channel

    def unsubscribe(self, viewer: Viewer) -> None:
        """Forget the viewer; the meeting's poller stops with its last viewer here."""
        channel = self.channels.get(viewer.meeting_id)
        if channel is None:
            return
        channel.viewers.discard(viewer)
        if not channel.viewers:
            del self.channels[viewer.meeting_id]
            if channel.poller is not None:
                channel.poller.cancel()

    def refuse_link(self, link_id: int, code: str) -> None:
        """A viewer link was revoked or expired: its viewers here are told ``code`` and closed."""
        for channel in self.channels.values():
            for viewer in channel.viewers:
                if viewer.link_id == link_id:
                    viewer.offer("refused", code)

    def refuse_token(self, api_token_id: int) -> None:
        """An API token was revoked or expired: the viewers its tickets admitted here are told and closed."""
        for channel in self.channels.values():
            for viewer in channel.viewers:
                if viewer.api_token_id == api_token_id:
                    viewer.offer("refused", "token_revoked")

    def api_token_ids(self) -> set[int]:
        """The API tokens whose tickets admitted viewers here."""
        return {
            v.api_token_id for c in self.channels.values() for v in c.viewers if v.api_token_id is not None
        }

    async def close(self, timeout_s: float = 2.0) -> None:
        """Shutdown: every viewer is told to reconnect (to another replica) and closed 1012; waits up to
        ``timeout_s`` for their sockets to go, then stops the pollers."""
        channels = list(self.channels.values())
        for channel in channels:
            channel.broadcast("restart", None)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.channels and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        pollers = [c.poller for c in channels if c.poller is not None]
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)

    # ----- the meeting's clock and the SQL poll -----------------------------------------------------------
    async def refresh(self, channel: Channel) -> MeetingClock | None:
        """Re-read the meeting's clock, streams and speaker names; tell the viewers of renamed speakers."""
        async with channel.lock:
            async with self._db.session() as db:
                clock = await read_clock(db, channel.meeting_id)
            old = channel.clock
            channel.clock = clock
        if old is not None and clock is not None:
            for user_id, name in clock.names.items():
                if old.names.get(user_id, name) != name:
                    channel.broadcast("speaker", {"user_id": user_id, "name": name})
        return clock

    async def _poll(self, channel: Channel) -> None:
        """Fan out finals stored by other replicas (or missed here), renames, and the meeting's end."""
        first = True
        while True:
            try:
                await self._poll_once(channel, first)
                first = False
            except SQLAlchemyError as exc:  # the database is away: try again next time
                log.warning(
                    "meeting_feed_poll_failed", meeting_id=channel.meeting_id, error=type(exc).__name__
                )
            except Exception:  # a bug: keep fanning out what this replica publishes, and say so
                log.exception("meeting_feed_poll_crashed", meeting_id=channel.meeting_id)
            finally:
                channel.ready.set()  # a first read that failed leaves the viewers to their own history read
            if channel.ended:
                return
            await asyncio.sleep(self.poll_s)

    async def _poll_once(self, channel: Channel, first: bool) -> None:
        clock = await self.refresh(channel)
        if clock is None:
            channel.broadcast("ended", None)
            channel.ended = True
            return
        if first:  # the viewers read what is stored now from SQL themselves
            for stream in clock.streams.values():
                channel.published.setdefault(stream.session_id, SeqTracker()).skip_to(stream.last_seq)
            return
        behind = {}
        for stream in clock.streams.values():
            tracker = channel.published.setdefault(stream.session_id, SeqTracker())
            if stream.last_seq > tracker.watermark:
                behind[stream.session_id] = tracker.watermark
        if behind:
            async with self._db.session() as db:
                segments = await segments_after(db, channel.meeting_id, behind)
            for segment in segments:
                if channel.published[segment.session_id].add(segment.seq):
                    channel.broadcast("final", segment)
        await self._check_links(channel)
        if clock.status == "ended" and not behind and self.streams_done(clock):
            channel.broadcast("ended", None)
            channel.ended = True

    async def _check_links(self, channel: Channel) -> None:
        """Close the views opened by links revoked (on any replica) or expired since."""
        link_ids = {v.link_id for v in channel.viewers if v.link_id is not None}
        if not link_ids:
            return
        now = utcnow()
        async with self._db.session() as db:
            rows = await db.execute(
                select(ViewerLink.id, ViewerLink.revoked_at).where(
                    ViewerLink.id.in_(link_ids),
                    (ViewerLink.revoked_at.is_not(None)) | (ViewerLink.expires_at <= now),
                )
            )
            refused = rows.tuples().all()
        for link_id, revoked_at in refused:
            self.refuse_link(link_id, "link_revoked" if revoked_at is not None else "link_expired")

    @staticmethod
    def streams_done(clock: MeetingClock) -> bool:
        """Every stream of an ended meeting has recorded its end (or had ``ENDED_GRACE_S`` to)."""
        if all(s.ended for s in clock.streams.values()):
            return True
        ended_at = clock.ended_at
        return ended_at is not None and utcnow() - ended_at > timedelta(seconds=ENDED_GRACE_S)

    async def place(self, channel: Channel, segment: CaptionSegment) -> dict[str, Any] | None:
        """The viewer message of a final (None if its stream cannot be found, e.g. deleted)."""
        clock = channel.clock
        if clock is None or segment.session_id not in clock.streams:
            clock = await self.refresh(channel)
        if clock is None or segment.session_id not in clock.streams:
            return None
        return clock.place(segment).message()

    async def partial_message(self, channel: Channel, partial: Partial) -> dict[str, Any]:
        """The viewer message of a partial, labelled with its speaker."""
        clock = channel.clock
        if clock is None or partial.user_id not in clock.names:
            with contextlib.suppress(SQLAlchemyError):
                clock = await self.refresh(channel)
        name = clock.speaker(partial.user_id) if clock is not None else ""
        return {
            "type": "partial",
            "session_id": partial.session_id,
            "speaker": {"user_id": partial.user_id, "name": name},
            "utterance": partial.utterance,
            "text": partial.text,
        }
