"""Queries more than one part of the service runs (one definition each)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from backend.db.models import Meeting, MeetingMember, Vocabulary, utcnow

__all__ = ["add_member", "meeting_with_terms"]


async def meeting_with_terms(db: AsyncSession, meeting_id: int) -> Meeting | None:
    """The meeting with its vocabularies and their terms loaded (None if there is no such meeting)."""
    query = (
        select(Meeting)
        .where(Meeting.id == meeting_id)
        .options(selectinload(Meeting.vocabularies).selectinload(Vocabulary.terms))
    )
    return (await db.execute(query)).scalar_one_or_none()


async def add_member(db: AsyncSession, meeting_id: int, user_id: int, added_by: int | None) -> None:
    """Make ``user_id`` a member of the meeting; nothing happens when they are one already (two sessions
    of one speaker starting at once both call this: ``ON CONFLICT DO NOTHING``, on SQLite and PostgreSQL)."""
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    values = {"meeting_id": meeting_id, "user_id": user_id, "added_by": added_by, "added_at": utcnow()}
    await db.execute(dialect.insert(MeetingMember).values(**values).on_conflict_do_nothing())
