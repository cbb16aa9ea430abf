"""The meeting view's catch-up from SQL: a meeting's clock and speaker names re-read, the SQLite poller
that fans out finals stored by other processes (or missed here), revoked or expired viewer links, an ended
meeting's last streams, and the speaker labels of the viewers' messages. ``MeetingFeed`` mixes it in."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from backend.db.models import CaptionSegment, ViewerLink, utcnow
from backend.db.session import Database
from backend.edge.logs import get_logger
from backend.meeting_view.timeline import MeetingClock, read_clock, segments_after
from backend.meeting_view.viewers import Channel, Partial, SeqTracker, SpeakerStatus

log = get_logger(__name__)

ENDED_GRACE_S = 10.0
"""After a meeting ends, how long viewers wait for streams that never recorded their end (a crashed
replica) before they are told it ended."""


class CatchUp:
    """What the feed reads from SQL (event-loop thread only); the feed sets ``_db`` and ``poll_s`` and
    gives ``refuse_link``."""

    _db: Database
    poll_s: float

    def refuse_link(self, link_id: int, code: str) -> None:
        raise NotImplementedError

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
