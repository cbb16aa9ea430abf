"""Deleting a meeting (or dictation) and everything of it, in one transaction, on SQLite and PostgreSQL.

Which tables hold a meeting's rows is read from the models' foreign keys, not listed by hand: a table added
later that points at ``meetings.id`` is erased with it. The access audit has no foreign key to meetings on
purpose: its rows about a deleted meeting stay (they hold no text)."""

from __future__ import annotations

from sqlalchemy import Table, delete
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Base, Meeting

__all__ = ["erase_meeting", "meeting_tables"]


def meeting_tables() -> list[tuple[Table, str]]:
    """Every table with a foreign key to ``meetings.id`` and that column's name, dependants first."""
    found: list[tuple[Table, str]] = []
    for table in reversed(Base.metadata.sorted_tables):
        for key in table.foreign_keys:
            if key.column.table.name == Meeting.__tablename__ and key.column.name == "id":
                found.append((table, key.parent.name))
    return found


async def erase_meeting(db: AsyncSession, meeting_id: int) -> None:
    """Delete the meeting's captions, corrections, sessions, speakers' names, members, viewer links,
    tickets, notes, vocabulary links and the meeting itself, in ``db``'s transaction (no reliance on the
    database's own ``ON DELETE CASCADE``, which SQLite applies only with its foreign keys on)."""
    for table, column in meeting_tables():
        await db.execute(delete(table).where(table.c[column] == meeting_id))
    await db.execute(delete(Meeting).where(Meeting.id == meeting_id))
