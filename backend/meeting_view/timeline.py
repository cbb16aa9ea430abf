"""A meeting's captions on one clock, with speaker labels: what the meeting view and the exports read.

A final's meeting time is (its stream session's start wall time - the meeting's ``started_at``) + its
``start_s`` on the session's audio clock (which a resumed session continues), so the finals of every
speaker interleave in real time. A speaker's label is their display name in the meeting
(``meeting_participants``), else their username; a label merged into another participant's
(``meeting_participants.merged_into``) shows that participant's. A final's text is its latest correction
(``caption_edits``) where it has one; ``original`` keeps what the recognizer wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import (
    CaptionEdit,
    CaptionSegment,
    Meeting,
    MeetingParticipant,
    StreamSession,
    User,
)
from backend.db.session import as_utc

__all__ = [
    "MeetingClock",
    "StreamClock",
    "TimelineFinal",
    "corrections",
    "in_meeting_order",
    "meeting_timeline",
    "read_clock",
    "segments_after",
    "speaker_names",
]

UNKNOWN_SPEAKER = "Former member"
"""The label of lines whose speaker's account was deleted (``stream_sessions.user_id`` set NULL)."""


@dataclass(frozen=True)
class StreamClock:
    """One stream session of the meeting: whose it is and where its audio clock starts on the meeting's."""

    session_id: str
    user_id: int | None
    offset_s: float
    last_seq: int
    ended: bool


@dataclass(frozen=True)
class TimelineFinal:
    """A stored final as the meeting view and the exports show it (times in seconds)."""

    id: int
    session_id: str
    seq: int
    user_id: int | None
    speaker: str
    text: str
    start_s: float
    end_s: float
    meeting_start_s: float
    meeting_end_s: float
    matched_terms: list[Any] = field(default_factory=list)
    original: str | None = None
    """What the recognizer wrote, where ``text`` is a correction (None: not corrected)."""

    def message(self) -> dict[str, Any]:
        """The meeting view's ``final`` message."""
        return {
            "type": "final",
            "id": self.id,
            "session_id": self.session_id,
            "seq": self.seq,
            "speaker": {"user_id": self.user_id, "name": self.speaker},
            "text": self.text,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "meeting_start_s": self.meeting_start_s,
            "meeting_end_s": self.meeting_end_s,
            "matched_terms": self.matched_terms,
            "edited": self.original is not None,
        }


@dataclass
class MeetingClock:
    """The meeting's zero, its streams and its speakers' labels, as last read from SQL."""

    meeting_id: int
    status: str
    zero: datetime | None
    ended_at: datetime | None
    streams: dict[str, StreamClock] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    corrected: dict[int, str] = field(default_factory=dict)
    """{segment id: its latest correction} (read by ``meeting_timeline``; empty for the live feed)."""

    def speaker(self, user_id: int | None) -> str:
        return self.names.get(user_id, UNKNOWN_SPEAKER) if user_id is not None else UNKNOWN_SPEAKER

    def place(self, segment: CaptionSegment) -> TimelineFinal:
        """``segment`` on the meeting's clock (its stream must be in ``streams``)."""
        stream = self.streams[segment.session_id]
        fixed = self.corrected.get(segment.id)
        edited = fixed is not None and fixed != segment.text
        return TimelineFinal(
            id=segment.id,
            session_id=segment.session_id,
            seq=segment.seq,
            user_id=stream.user_id,
            speaker=self.speaker(stream.user_id),
            text=fixed if edited and fixed is not None else segment.text,
            start_s=segment.start_s,
            end_s=segment.end_s,
            meeting_start_s=round(stream.offset_s + segment.start_s, 3),
            meeting_end_s=round(stream.offset_s + segment.end_s, 3),
            matched_terms=list(segment.matched_terms or []),
            original=segment.text if edited else None,
        )


async def read_clock(db: AsyncSession, meeting_id: int) -> MeetingClock | None:
    """The meeting's clock, streams and speaker labels (None when the meeting does not exist)."""
    meeting = await db.get(Meeting, meeting_id)
    if meeting is None:
        return None
    rows = list(
        (await db.execute(select(StreamSession).where(StreamSession.meeting_id == meeting_id))).scalars()
    )
    starts = [as_utc(r.created_at) for r in rows]
    zero = as_utc(meeting.started_at) if meeting.started_at else min(starts, default=None)
    clock = MeetingClock(
        meeting_id=meeting_id,
        status=meeting.status.value,
        zero=zero,
        ended_at=as_utc(meeting.ended_at) if meeting.ended_at else None,
    )
    for row, start in zip(rows, starts, strict=True):
        offset_s = (start - zero).total_seconds() if zero is not None else 0.0
        clock.streams[row.id] = StreamClock(
            row.id, row.user_id, offset_s, row.last_seq, row.ended_at is not None
        )
    clock.names = await speaker_names(db, meeting_id, {r.user_id for r in rows if r.user_id is not None})
    return clock


async def speaker_names(db: AsyncSession, meeting_id: int, user_ids: Iterable[int]) -> dict[int, str]:
    """Each user's label in the meeting: their display name there, else their account's display name, else
    their username; a label merged into another participant's is that participant's label."""
    ids = set(user_ids)
    if not ids:
        return {}
    part = MeetingParticipant
    query = select(part.user_id, part.display_name, part.merged_into).where(part.meeting_id == meeting_id)
    rows = (await db.execute(query)).tuples().all()
    merged = {user_id: into for user_id, _name, into in rows if into is not None and user_id in ids}
    everyone = sorted(ids | set(merged.values()))
    users = await db.execute(select(User.id, User.username, User.display_name).where(User.id.in_(everyone)))
    names = {user_id: display or username for user_id, username, display in users.all()}
    names.update({user_id: name for user_id, name, _into in rows if user_id in names and name})
    for user_id, into in merged.items():
        names[user_id] = names.get(into, names.get(user_id, UNKNOWN_SPEAKER))
    return {user_id: name for user_id, name in names.items() if user_id in ids}


async def corrections(db: AsyncSession, meeting_id: int) -> dict[int, str]:
    """{segment id: its latest correction} of the meeting's finals."""
    query = (
        select(CaptionEdit.segment_id, CaptionEdit.text)
        .where(CaptionEdit.meeting_id == meeting_id)
        .order_by(CaptionEdit.id)
    )
    return dict((await db.execute(query)).tuples().all())


async def segments_after(
    db: AsyncSession, meeting_id: int, after: dict[str, int] | None = None
) -> list[CaptionSegment]:
    """The meeting's stored finals; with ``after`` ({session_id: seq}), only those of its sessions that
    come after that seq."""
    query = select(CaptionSegment).where(CaptionSegment.meeting_id == meeting_id)
    if after is not None:
        if not after:
            return []
        query = query.where(
            or_(*((CaptionSegment.session_id == s) & (CaptionSegment.seq > n) for s, n in after.items()))
        )
    return list((await db.execute(query.order_by(CaptionSegment.id))).scalars())


def in_meeting_order(finals: Iterable[TimelineFinal]) -> list[TimelineFinal]:
    """Finals ordered by their start on the meeting's clock (then by stream and number)."""
    return sorted(finals, key=lambda f: (f.meeting_start_s, f.meeting_end_s, f.session_id, f.seq))


async def meeting_timeline(db: AsyncSession, meeting_id: int) -> tuple[MeetingClock, list[TimelineFinal]]:
    """Every stored final of the meeting on its clock, in meeting order (LookupError: no such meeting)."""
    clock = await read_clock(db, meeting_id)
    if clock is None:
        raise LookupError(f"meeting {meeting_id} does not exist")
    clock.corrected = await corrections(db, meeting_id)
    segments = await segments_after(db, meeting_id)
    return clock, in_meeting_order(clock.place(s) for s in segments if s.session_id in clock.streams)
