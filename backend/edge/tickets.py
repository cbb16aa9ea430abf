"""Speaker tickets at the edge: a ticket is single-use, short-lived and bound to a user and a meeting;
redeeming it says who may stream into (or watch) which meeting. Only the ticket's hash is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, update

from backend.db.models import Ticket, User, utcnow
from backend.db.session import Database
from backend.edge.security import ticket_api_token, token_hash

TICKET_PREFIX = "ticket."
"""A ticket travels as the WebSocket subprotocol ``ticket.<ticket>`` (never in the URL)."""


@dataclass(frozen=True)
class Admission:
    """What a valid ticket grants: this user may stream into this meeting (holding one slot)."""

    user_id: int
    username: str
    meeting_id: int
    api_token_id: int | None = None


async def redeem_ticket(database: Database, ticket: str) -> Admission | None:
    """Mark the ticket used (atomically: a ticket works once) and return what it grants."""
    now = utcnow()
    async with database.session() as db:
        result = await db.execute(
            update(Ticket)
            .where(Ticket.token_hash == token_hash(ticket), Ticket.used_at.is_(None), Ticket.expires_at > now)
            .values(used_at=now)
        )
        if cast("CursorResult[Any]", result).rowcount != 1:
            return None
        row = await db.get(Ticket, token_hash(ticket))
        user = await db.get(User, row.user_id) if row else None
        if row is None or user is None:
            return None
        return Admission(user.id, user.username, row.meeting_id, ticket_api_token(ticket))
