"""A caption session's opening: a new session's row, or a resume that the database lets exactly one
connection win, with the finals to replay and where this connection's audio starts."""

from __future__ import annotations

import asyncio
from typing import Any

from backend.db.models import CaptionSegment, utcnow
from backend.db.session import as_utc
from backend.edge.security import token_hash
from backend.edge.websocket import ProtocolViolation
from backend.sessions.caption_store import restart_point
from backend.sessions.core import SessionCore
from backend.sessions.protocol import check_held_audio


class SessionOpening(SessionCore):
    """How a caption session starts or resumes (called from its ``start`` handling)."""

    async def _open_session(
        self, message: dict[str, Any], held: tuple[float | None, float | None]
    ) -> tuple[str, list[CaptionSegment]]:
        """Create the stream session, or resume one: returns the resume token and the finals to replay, and
        sets where this connection's audio starts (``ready``'s ``resume_from_s``)."""
        token = message.get("resume_token")
        if isinstance(token, str):
            replay, last_end_s = await self._resume(token, message.get("last_seq") or 0, held[0])
        else:
            check_held_audio(held[0], 0.0, self._held_slack_s())
            await self._meeting_goes_live()
            opened = await self._store.create(self.meeting_id, self.user_id)
            self.session_id, self.resume_token_hash = opened.session_id, opened.resume_token_hash
            token, replay, last_end_s = opened.resume_token, [], 0.0
        audio_s, buffered_from_s = held
        max_resend_s = self.svc.settings.max_resend_s
        self.audio_offset_s = restart_point(last_end_s, audio_s, buffered_from_s, max_resend_s)
        if audio_s is not None:
            self.resend_s = max(0.0, audio_s - self.audio_offset_s)
            self._catching_up = self.resend_s > 0
        if self.audio_offset_s > last_end_s + 0.001:  # the client no longer holds that audio
            self._not_captioned = {"from_s": round(last_end_s, 3), "to_s": self.audio_offset_s}
        return token, replay

    async def _meeting_goes_live(self) -> None:
        if not await self._store.meeting_goes_live(self.meeting_id):
            raise ProtocolViolation(1008, "the meeting has ended")

    def _held_slack_s(self) -> float:
        """Audio a client may hold beyond its session's age: what it may send again, and its burst."""
        return self.svc.settings.max_resend_s + self.svc.settings.audio_burst_s

    async def _resume(
        self, token: str, last_seq: Any, audio_s: float | None
    ) -> tuple[list[CaptionSegment], float]:
        """Claim the session (the database lets exactly one resume win; ResumeConflict for the others);
        returns its finals after ``last_seq`` and where its stored finals end."""
        if not isinstance(last_seq, int):
            raise ProtocolViolation(1008, "last_seq must be an integer")
        row = await self._store.resumable(token, self.meeting_id, self.user_id)  # before ending anything
        if row is None:
            raise ProtocolViolation(1008, "resume token unknown or expired", "resume_expired")
        check_held_audio(audio_s, (utcnow() - as_utc(row.created_at)).total_seconds(), self._held_slack_s())
        await self._end_previous_connection(token_hash(token))
        await self._meeting_goes_live()
        opened = await self._store.resume(token, self.meeting_id, self.user_id)
        if opened is None:
            raise ProtocolViolation(1008, "resume token unknown or expired", "resume_expired")
        self.generation = opened.generation
        self.resume_token_hash = opened.resume_token_hash
        self.session_id = opened.session_id
        self.seq = opened.last_seq
        return [s for s in opened.segments if s.seq > last_seq], opened.last_end_s

    async def _end_previous_connection(self, resume_hash: str) -> None:
        """A resume can arrive while the dropped connection is still flushing its last finals on this
        replica: let it finish first, so the replay includes them and numbering continues after them."""
        for old in list(self.svc.hub.sessions.values()):
            if old is not self and old.resume_token_hash == resume_hash:
                try:
                    await asyncio.wait_for(old.end(1008, "resumed by a new connection"), timeout=30.0)
                except TimeoutError as exc:
                    raise ProtocolViolation(1013, "the previous connection is still closing; retry") from exc
