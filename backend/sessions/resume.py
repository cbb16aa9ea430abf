"""Resuming a stream session: exactly one new connection may continue it, and the database decides.

A resume claims the session with a conditional UPDATE of ``stream_sessions.generation`` (from the value it
read to the next): of several claims that read the same value, on any replicas, exactly one changes the
row. On one replica a second resume of a session whose resume is still in progress is refused at once
(``ResumesInProgress``), so two clients racing with the same token cannot both stream. A connection whose
generation is no longer the session's has been superseded by a later resume and ends
(``backend.sessions.ws``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, update

from backend.db.models import StreamSession
from backend.db.session import Database


class ResumeConflict(Exception):
    """Another connection is resuming, or has just resumed, the same session."""


class ResumesInProgress:
    """Resume-token hashes whose resume is between ``start`` and ``ready`` on this replica (event loop)."""

    def __init__(self) -> None:
        self._hashes: set[str] = set()

    @contextmanager
    def hold(self, resume_hash: str | None) -> Iterator[None]:
        """Mark a resume in progress for the block; ResumeConflict if one already is (None: not a resume)."""
        if resume_hash is None:
            yield
            return
        if resume_hash in self._hashes:
            raise ResumeConflict("another connection is resuming this session")
        self._hashes.add(resume_hash)
        try:
            yield
        finally:
            self._hashes.discard(resume_hash)


async def claim(db: Database, session_id: str, seen_generation: int, expires_at: datetime) -> int:
    """Take the session over from ``seen_generation``; returns the new generation. ResumeConflict when
    another claim changed the row first (the database serialises the UPDATEs)."""
    async with db.session() as session:
        result = await session.execute(
            update(StreamSession)
            .where(StreamSession.id == session_id, StreamSession.generation == seen_generation)
            .values(generation=seen_generation + 1, resume_expires_at=expires_at, ended_at=None)
        )
    if cast("CursorResult[Any]", result).rowcount != 1:
        raise ResumeConflict("another connection resumed this session")
    return seen_generation + 1
