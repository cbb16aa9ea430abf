"""Captions of stream sessions in SQL: a session's row, numbering, persist-before-send and replay on resume.

The database numbers the captions (``stream_sessions.last_seq``, in the transaction that stores each one) and
decides which connection owns a session (``backend.sessions.resume``): a caption is stored only by the
connection of
the session's current generation, so after a resume the dropped connection (perhaps still decoding its last
chunks on another replica) can store nothing more. Its audio is not lost: the resuming client sends its
audio again from the end of the last stored final (``restart_point``). The WebSocket session
(``backend.sessions.ws``) sends a final only after ``store`` returned it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import insert, select, update

from backend.db.models import CaptionSegment, Meeting, MeetingStatus, StreamSession, utcnow
from backend.db.session import Database, as_utc
from backend.edge.security import new_token, token_hash
from backend.engine.types import SAMPLE_RATE_HZ
from backend.sessions import resume

__all__ = ["CaptionStore", "OpenedSession", "Superseded", "final_message", "restart_point"]


class Superseded(Exception):
    """The session was resumed by a newer connection: this one may store nothing more."""


@dataclass(frozen=True)
class OpenedSession:
    """A stream session this connection now owns: its id, the resume token the client keeps (plain, only
    returned to the client), its generation, where its audio clock stands and the finals stored so far."""

    session_id: str
    resume_token: str
    generation: int
    audio_offset_s: float = 0.0
    segments: list[CaptionSegment] = field(default_factory=list)

    @property
    def resume_token_hash(self) -> str:
        return token_hash(self.resume_token)

    @property
    def last_seq(self) -> int:
        return self.segments[-1].seq if self.segments else 0

    @property
    def last_end_s(self) -> float:
        """Where the stored captions end on the session's audio clock (0 before the first)."""
        return max((s.end_s for s in self.segments), default=0.0)


def restart_point(
    last_end_s: float, audio_s: float | None, buffered_from_s: float | None, max_resend_s: float
) -> float:
    """Where a resumed connection's audio starts on the session's clock: the end of the last stored final,
    so nothing after it is lost and nothing before it is decoded twice. Clamped to the audio the client
    still holds (``buffered_from_s`` .. ``audio_s``, when it says) and to ``max_resend_s`` before
    ``audio_s``; rounded to a sample, which is where the client restarts."""
    point = last_end_s
    if audio_s is not None:
        floor_s = max(buffered_from_s if buffered_from_s is not None else 0.0, audio_s - max_resend_s)
        point = min(max(point, floor_s), audio_s)
    return round(max(0.0, point) * SAMPLE_RATE_HZ) / SAMPLE_RATE_HZ


class CaptionStore:
    """Stream sessions and their captions (``resume_ttl_s``: how long a dropped session may be resumed)."""

    def __init__(self, db: Database, resume_ttl_s: float) -> None:
        self._db = db
        self._resume_ttl_s = resume_ttl_s

    def _expiry(self) -> Any:
        return utcnow() + timedelta(seconds=self._resume_ttl_s)

    async def meeting_goes_live(self, meeting_id: int) -> bool:
        """Mark a scheduled meeting live; False when it has ended (or does not exist)."""
        async with self._db.session() as db:
            meeting = await db.get(Meeting, meeting_id)
            if meeting is None or meeting.status == MeetingStatus.ENDED:
                return False
            if meeting.status == MeetingStatus.SCHEDULED:
                meeting.status, meeting.started_at = MeetingStatus.LIVE, utcnow()
        return True

    async def create(self, meeting_id: int, user_id: int) -> OpenedSession:
        """A new stream session with a fresh resume token."""
        token = new_token()
        session_id = str(uuid.uuid4())
        async with self._db.session() as db:
            db.add(
                StreamSession(
                    id=session_id,
                    meeting_id=meeting_id,
                    user_id=user_id,
                    resume_token_hash=token_hash(token),
                    resume_expires_at=self._expiry(),
                )
            )
        return OpenedSession(session_id, token, generation=0)

    async def resumable(self, token: str, meeting_id: int, user_id: int) -> StreamSession | None:
        """The session ``token`` may resume for this user in this meeting; None when the token is unknown,
        expired, of another meeting or of another user (a resume token alone never lets someone speak as a
        colleague or read their captions)."""
        async with self._db.session() as db:
            query = select(StreamSession).where(StreamSession.resume_token_hash == token_hash(token))
            row = (await db.execute(query)).scalar_one_or_none()
        if row is None or (row.meeting_id, row.user_id) != (meeting_id, user_id):
            return None
        return row if as_utc(row.resume_expires_at) >= utcnow() else None

    async def resume(self, token: str, meeting_id: int, user_id: int) -> OpenedSession | None:
        """Claim the session of ``token`` (``resume.ResumeConflict`` if another connection claims it first)
        with every final stored so far; None when ``resumable`` says no."""
        row = await self.resumable(token, meeting_id, user_id)
        if row is None:
            return None
        generation = await resume.claim(self._db, row.id, row.generation, self._expiry())
        async with self._db.session() as db:
            stored = select(CaptionSegment).where(CaptionSegment.session_id == row.id)
            segments = list((await db.execute(stored.order_by(CaptionSegment.seq))).scalars())
        return OpenedSession(row.id, token, generation, row.audio_offset_s, segments)

    async def probe(self, session_id: str, meeting_id: int) -> None:
        """Write a caption row of the session and roll it back: raises while captions cannot be stored
        (a full disk, a lost database)."""
        async with self._db.engine.connect() as connection:
            transaction = await connection.begin()
            try:
                await connection.execute(
                    insert(CaptionSegment).values(
                        meeting_id=meeting_id,
                        session_id=session_id,
                        seq=0,
                        text="",
                        start_s=0.0,
                        end_s=0.0,
                        words=[],
                        matched_terms=[],
                    )
                )
            finally:
                await transaction.rollback()

    async def store(
        self, session_id: str, generation: int, fields: dict[str, Any], audio_end_s: float
    ) -> CaptionSegment:
        """Number and store one caption for the connection of ``generation`` (one attempt; the caller
        retries); ``Superseded`` when a later resume owns the session. ``audio_end_s``: the audio decoded
        when it was committed, kept with the session."""
        segment = CaptionSegment(session_id=session_id, **fields)
        owned = (StreamSession.id == session_id) & (StreamSession.generation == generation)
        async with self._db.session() as db:
            numbered = (
                await db.execute(
                    update(StreamSession)
                    .where(owned)
                    .values(last_seq=StreamSession.last_seq + 1, audio_offset_s=audio_end_s)
                    .returning(StreamSession.last_seq)
                )
            ).one_or_none()
            if numbered is None:
                raise Superseded("the session was resumed by another connection")
            segment.seq = numbered[0]
            db.add(segment)
        return segment

    async def record_end(self, session_id: str, generation: int) -> None:
        """The connection of ``generation`` ended (ignored once a later resume owns the session)."""
        owned = (StreamSession.id == session_id) & (StreamSession.generation == generation)
        async with self._db.session() as db:
            await db.execute(update(StreamSession).where(owned).values(ended_at=utcnow()))


def final_message(segment: CaptionSegment) -> dict[str, Any]:
    """The protocol's ``final`` message for a stored caption."""
    return {
        "type": "final",
        "seq": segment.seq,
        "text": segment.text,
        "start_s": segment.start_s,
        "end_s": segment.end_s,
        "words": segment.words or [],
        "matched_terms": segment.matched_terms or [],
    }
