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
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from backend.db.models import CaptionSegment, ViewerLink, utcnow
from backend.db.session import Database, as_utc
from backend.edge.logs import get_logger
from backend.meeting_view.bus import FeedBus, PayloadTooLarge, PostgresBus
from backend.meeting_view.catch_up import CatchUp
from backend.meeting_view.viewers import (
    SPEAKER_STATES,
    VIEWER_QUEUE_MAX,
    Channel,
    Connected,
    Partial,
    SeqTracker,
    SpeakerStatus,
    Speaking,
    Viewer,
    final_fields,
    segment_of,
)

log = get_logger(__name__)

POLL_S = 1.5
"""SQLite: how often a meeting with viewers here reads SQL for finals stored by other processes, seconds."""
ENDED_CHECK_S = 1.0
"""PostgreSQL: how often an ended meeting with viewers here reads SQL until its last streams have ended."""


class MeetingFeed(CatchUp):
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
