"""Queries more than one part of the service runs (one definition each)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from backend.db.models import Meeting, Vocabulary

__all__ = ["meeting_with_terms"]


async def meeting_with_terms(db: AsyncSession, meeting_id: int) -> Meeting | None:
    """The meeting with its vocabularies and their terms loaded (None if there is no such meeting)."""
    query = (
        select(Meeting)
        .where(Meeting.id == meeting_id)
        .options(selectinload(Meeting.vocabularies).selectinload(Vocabulary.terms))
    )
    return (await db.execute(query)).scalar_one_or_none()
