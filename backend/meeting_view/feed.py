"""Fan-out of a meeting's live captions to its viewers (the read-only meeting view,
``backend.meeting_view.viewer_ws``).

Publishing never waits: a caption session calls ``publish_partial`` / ``publish_final`` (plain function
calls on the event loop), which append to each viewer's bounded queue and return. A viewer that falls
behind first skips partials (they are replaced anyway); a final that does not fit drops the viewer, whose
socket then closes 1013 ``too_slow`` (its page reconnects and reloads the meeting from SQL). A slow viewer
therefore costs the speakers nothing.

Several replicas share one database but not this process. On PostgreSQL (the only database several
replicas can share) every publish also goes out on the database's ``LISTEN``/``NOTIFY`` bus
(``backend.meeting_view.bus``): each replica's streams notify ``captions_meeting_<id>``, and each meeting with
viewers here ``LISTEN``s to its channel, so partials, finals, speaker statuses, renames, the meeting's end
and revoked viewer links from any replica reach every viewer at once, without polling. SQL is read only
when the channel opens, when notifications may have been lost (the bus reconnected, a final too large for
a notification, a gap in a stream's numbers) and while an ended meeting waits for its last streams.

On SQLite (one replica) the fan-out is in process, as before: each meeting with viewers here also has one
poller that reads SQL every ``poll_s`` for finals not published here, renames and the meeting's end.
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
from backend.db.session import Database, as_utc
from backend.edge.logs import get_logger
from backend.meeting_view.bus import FeedBus, PayloadTooLarge, PostgresBus
from backend.meeting_view.timeline import MeetingClock, read_clock, segments_after

log = get_logger(__name__)

POLL_S = 1.5
"""SQLite: how often a meeting with viewers here reads SQL for finals stored by other processes, seconds."""
ENDED_CHECK_S = 1.0
"""PostgreSQL: how often an ended meeting with viewers here reads SQL until its last streams have ended."""
VIEWER_QUEUE_MAX = 256
"""Events one viewer may have waiting; partials are skipped from half of it, a final beyond it drops the
viewer."""
ENDED_GRACE_S = 10.0
"""After a meeting ends, how long viewers wait for streams that never recorded their end (a crashed
replica) before they are told it ended."""


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


class MeetingFeed:
    """Per-meeting publish/subscribe of live captions on this replica (event-loop thread only)."""

    def __init__(
        self,
        db: Database,
        poll_s: float = POLL_S,
        max_queued: int = VIEWER_QUEUE_MAX,
        bus: FeedBus | None = None,
    ) -> None:
        self._db = db
        self.poll_s = poll_s
        self.max_queued = max_queued
        self.channels: dict[int, Channel] = {}
        if bus is None and db.engine.dialect.name == "postgresql":
            bus = PostgresBus.for_url(db.url, self._remote, self._resync_all)
        self.bus = bus
        self._tasks: set[asyncio.Task[None]] = set()
        self.statuses: dict[int, dict[str, SpeakerStatus]] = {}
        """Per meeting, the status of each speaking session this replica knows (its own sessions', and those
        of other replicas heard on the bus while it has viewers of the meeting); stopped ones are dropped."""

    @property
    def viewers(self) -> int:
        return sum(len(c.viewers) for c in self.channels.values())

    # ----- publishing (from caption sessions; never waits) -------------------------------------------------
    def publish_partial(self, session: Speaking, text: str) -> None:
        """A session's new partial text, to the meeting's viewers here (skipped by slow ones) and on the
        bus."""
        channel = self.channels.get(session.meeting_id)
        if channel is not None:
            channel.broadcast(
                "partial", Partial(session.session_id, session.user_id, session.utterance, text)
            )
        if self.bus is not None:
            event = {"k": "p", "s": session.session_id, "u": session.user_id, "n": session.utterance}
            with contextlib.suppress(PayloadTooLarge):  # a partial that long is replaced by its final
                self.bus.publish(session.meeting_id, event | {"t": text})

    def publish_final(self, session: Speaking, segment: CaptionSegment) -> None:
        """A stored final (``segment``, already persisted), to the meeting's viewers here and on the bus
        (a final too large for a notification goes as a reference the receivers read from SQL)."""
        channel = self.channels.get(session.meeting_id)
        if channel is not None and channel.published.setdefault(segment.session_id, SeqTracker()).add(
            segment.seq
        ):
            channel.broadcast("final", segment)
        if self.bus is not None:
            ref = {"s": segment.session_id, "q": segment.seq}
            try:
                self.bus.publish(session.meeting_id, {"k": "f", **ref, **final_fields(segment)})
            except PayloadTooLarge:
                self.bus.publish(session.meeting_id, {"k": "r", **ref})

    def publish_status(self, session: Connected, state: str, resume_window_s: float | None = None) -> None:
        """A speaking session went ``live`` (started or resumed), ``reconnecting`` (its client vanished; a
        resume within ``resume_window_s`` continues it, else it counts as ``stopped`` then) or ``stopped``,
        to the meeting's viewers here and on the bus. ``stopped`` after ``reconnecting`` of the same
        connection is the vanished connection's end, not a stop: it is ignored."""
        if state not in SPEAKER_STATES:
            raise ValueError(f"state must be one of {SPEAKER_STATES}, got {state!r}")
        known = self.statuses.get(session.meeting_id, {}).get(session.session_id)
        if (
            state == "stopped"
            and known is not None
            and known.state == "reconnecting"
            and known.generation == session.generation
        ):
            return
        status = SpeakerStatus(session.session_id, session.user_id, session.generation, state)
        if not self._set_status(session.meeting_id, status):
            return
        if self.bus is not None:
            event = {"k": "st", "s": status.session_id, "u": status.user_id, "g": status.generation}
            self.bus.publish(session.meeting_id, event | {"st": state})
        if state == "reconnecting" and resume_window_s is not None:
            asyncio.get_running_loop().call_later(
                resume_window_s, self._window_closed, session.meeting_id, status
            )

    def _window_closed(self, meeting_id: int, status: SpeakerStatus) -> None:
        """The resume window of a vanished session closed: unless it was resumed, it has stopped."""
        if self.statuses.get(meeting_id, {}).get(status.session_id) == status:
            stopped = SpeakerStatus(status.session_id, status.user_id, status.generation, "stopped")
            self._set_status(meeting_id, stopped)
            if self.bus is not None:
                event = {"k": "st", "s": status.session_id, "u": status.user_id, "g": status.generation}
                self.bus.publish(meeting_id, event | {"st": "stopped"})

    def _set_status(self, meeting_id: int, status: SpeakerStatus) -> bool:
        """Record ``status`` and tell the meeting's viewers here; False (nothing done) when it is older than
        what is known of its session."""
        known = self.statuses.get(meeting_id, {}).get(status.session_id)
        if known is not None and status.generation < known.generation:
            return False
        statuses = self.statuses.setdefault(meeting_id, {})
        if status.state == "stopped":
            statuses.pop(status.session_id, None)
        else:
            statuses[status.session_id] = status
        if not statuses:
            del self.statuses[meeting_id]
        channel = self.channels.get(meeting_id)
        if channel is not None:
            channel.broadcast("status", status)
        return True

    def meeting_changed(self, meeting_id: int) -> None:
        """The meeting ended, was deleted, or a speaker was renamed in it: its viewers here and on every
        replica re-read its clock (and are told ``speaker`` / ``ended``)."""
        channel = self.channels.get(meeting_id)
        if channel is not None and self.bus is not None:
            self._schedule_sync(channel)
        if self.bus is not None:
            self.bus.publish(meeting_id, {"k": "c"})

    def revoke_link(self, meeting_id: int, link_id: int) -> None:
        """A viewer link was revoked: its views here close at once, and on every replica through the bus
        (SQLite: the other processes' pollers find it)."""
        self.refuse_link(link_id, "link_revoked")
        if self.bus is not None:
            self.bus.publish(meeting_id, {"k": "l", "id": link_id, "c": "link_revoked"})

    # ----- from the bus (other replicas) ------------------------------------------------------------------
    def _remote(self, meeting_id: int, event: dict[str, Any]) -> None:
        """One event another replica published for a meeting followed here."""
        channel = self.channels.get(meeting_id)
        if channel is None:
            return
        kind = event.get("k")
        try:
            if kind == "p":
                channel.broadcast(
                    "partial", Partial(str(event["s"]), int(event["u"]), int(event["n"]), event["t"])
                )
            elif kind == "f":
                segment = segment_of(meeting_id, event)
                tracker = channel.published.setdefault(segment.session_id, SeqTracker())
                if tracker.add(segment.seq):
                    channel.broadcast("final", segment)
                if tracker.above and channel.ready.is_set():  # an earlier final never came: read SQL
                    self._schedule_sync(channel)
            elif kind == "st":
                state = str(event["st"])
                if state in SPEAKER_STATES:
                    status = SpeakerStatus(str(event["s"]), int(event["u"]), int(event["g"]), state, False)
                    self._set_status(meeting_id, status)
            elif kind in ("r", "c"):
                self._schedule_sync(channel)
            elif kind == "l":
                self.refuse_link(int(event["id"]), str(event["c"]))
        except (KeyError, TypeError, ValueError):
            log.warning("meeting_feed_bad_event", meeting_id=meeting_id, kind=kind)

    def _resync_all(self) -> None:
        """The bus was away: events may have been missed; every followed meeting reads SQL once."""
        for channel in self.channels.values():
            if channel.ready.is_set():
                self._schedule_sync(channel)

    def _schedule_sync(self, channel: Channel) -> None:
        """Read the channel's meeting from SQL soon (one read at a time; a request meanwhile reads again)."""
        if channel.ended or self.channels.get(channel.meeting_id) is not channel:
            return
        if channel.syncing is not None and not channel.syncing.done():
            channel.sync_again = True
            return
        channel.syncing = asyncio.create_task(self._sync(channel), name=f"meeting-sync-{channel.meeting_id}")

    async def _sync(self, channel: Channel) -> None:
        while True:
            channel.sync_again = False
            ok = await self._poll_safely(channel, first=False)
            if not channel.sync_again:
                break
        retry = not ok or (channel.clock is not None and channel.clock.status == "ended")
        if retry and not channel.ended:  # the database was away, or the last streams have yet to end
            asyncio.get_running_loop().call_later(ENDED_CHECK_S, self._schedule_sync, channel)

    async def _follow(self, channel: Channel) -> None:
        """PostgreSQL: LISTEN to the meeting's channel, then read where its streams are."""
        if self.bus is not None:
            await self.bus.listen(channel.meeting_id)
        await self._poll_safely(channel, first=True)
        channel.ready.set()
        if channel.clock is not None and channel.clock.status == "ended" and not channel.ended:
            self._schedule_sync(channel)

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
            work = self._poll(channel) if self.bus is None else self._follow(channel)
            channel.poller = asyncio.create_task(work, name=f"meeting-feed-{meeting_id}")
        viewer = Viewer(meeting_id, self.max_queued, link_id, api_token_id)
        channel.viewers.add(viewer)
        for status in self.statuses.get(meeting_id, {}).values():  # sent after its history
            viewer.offer("status", status)
        if self.bus is not None and link_id is not None:
            await self._expire_later(viewer, link_id)
        await channel.ready.wait()
        return viewer, channel

    async def _expire_later(self, viewer: Viewer, link_id: int) -> None:
        """PostgreSQL (no poller): the link's view closes ``link_expired`` when the link expires."""
        try:
            async with self._db.session() as db:
                expires_at = await db.scalar(select(ViewerLink.expires_at).where(ViewerLink.id == link_id))
        except SQLAlchemyError:
            return  # the next resync's link check finds it
        if expires_at is not None:
            left_s = (as_utc(expires_at) - utcnow()).total_seconds()
            viewer.expiry = asyncio.get_running_loop().call_later(
                max(0.0, left_s), viewer.offer, "refused", "link_expired"
            )

    def unsubscribe(self, viewer: Viewer) -> None:
        """Forget the viewer; the meeting's poller stops with its last viewer here."""
        channel = self.channels.get(viewer.meeting_id)
        if channel is None:
            return
        channel.viewers.discard(viewer)
        if viewer.expiry is not None:
            viewer.expiry.cancel()
        if not channel.viewers:
            del self.channels[viewer.meeting_id]
            for task in (channel.poller, channel.syncing):
                if task is not None:
                    task.cancel()
            if self.bus is not None:
                self.bus.unlisten(viewer.meeting_id)
            statuses = self.statuses.get(viewer.meeting_id, {})
            for session_id in [k for k, v in statuses.items() if not v.local]:  # no longer heard: forget
                del statuses[session_id]
            if not statuses:
                self.statuses.pop(viewer.meeting_id, None)

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
        pollers = [t for c in channels for t in (c.poller, c.syncing) if t is not None]
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        if self.bus is not None:
            await self.bus.close()  # sends what the drained sessions published last

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
        """SQLite: fan out finals stored by other processes (or missed here), renames, and the meeting's
        end."""
        first = True
        while True:
            await self._poll_safely(channel, first)
            first = False
            channel.ready.set()  # a first read that failed leaves the viewers to their own history read
            if channel.ended:
                return
            await asyncio.sleep(self.poll_s)

    async def _poll_safely(self, channel: Channel, first: bool) -> bool:
        """One read of the meeting (``_poll_once``); False when it failed (logged)."""
        try:
            await self._poll_once(channel, first)
            return True
        except SQLAlchemyError as exc:  # the database is away: try again next time
            log.warning("meeting_feed_poll_failed", meeting_id=channel.meeting_id, error=type(exc).__name__)
        except Exception:  # a bug: keep fanning out what this replica publishes, and say so
            log.exception("meeting_feed_poll_crashed", meeting_id=channel.meeting_id)
        return False

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

    async def _speaker(self, channel: Channel, user_id: int) -> dict[str, Any]:
        """A message's speaker label (the meeting's clock re-read once for a speaker it does not know)."""
        clock = channel.clock
        if clock is None or user_id not in clock.names:
            with contextlib.suppress(SQLAlchemyError):
                clock = await self.refresh(channel)
        return {"user_id": user_id, "name": clock.speaker(user_id) if clock is not None else ""}

    async def partial_message(self, channel: Channel, partial: Partial) -> dict[str, Any]:
        """The viewer message of a partial, labelled with its speaker."""
        return {
            "type": "partial",
            "session_id": partial.session_id,
            "speaker": await self._speaker(channel, partial.user_id),
            "utterance": partial.utterance,
            "text": partial.text,
        }

    async def status_message(self, channel: Channel, status: SpeakerStatus) -> dict[str, Any]:
        """The viewer message of a speaker's status, labelled with its speaker."""
        return {
            "type": "speaker_status",
            "session_id": status.session_id,
            "speaker": await self._speaker(channel, status.user_id),
            "state": status.state,
        }


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
