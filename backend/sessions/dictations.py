"""Dictations left live: one whose page was closed (or lost its network) without Stop ends on the server.

A dictation is left live when it is marked live, no stream of it is connected to this replica, and every
stream of it ended more than ``IDLE_END_S`` ago (a dictation that never streamed: started that long ago).
``end_idle_dictations`` marks those ended; the app runs it every ``SWEEP_S`` and before listing dictations.
A stream without an end time (connected, perhaps to another replica, or whose replica died) counts as
connected while its resume window (``resume_expires_at``) is open or it stored a caption within
``IDLE_END_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from backend.db.models import CaptionSegment, Meeting, MeetingKind, MeetingStatus, StreamSession, utcnow
from backend.db.session import Database
from backend.edge.logs import get_logger
from backend.sessions.live import LiveHub

log = get_logger(__name__)

IDLE_END_S = 120.0
"""How long a dictation with no connected stream stays live (seconds): long enough to reconnect."""
SWEEP_S = 30.0
"""How often the app looks for dictations left live (seconds)."""


def connected_meetings(hub: LiveHub) -> set[int]:
    """The meetings with a stream connected to this replica."""
    return {meeting_id for meeting_id, live in hub.meetings.items() if live.sessions}


async def end_idle_dictations(
    db: Database, connected: Callable[[], set[int]], idle_s: float = IDLE_END_S, now: datetime | None = None
) -> list[int]:
    """Mark ended the dictations left live (``connected()``: the meetings with a stream on this replica);
    returns their ids."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=idle_s)
    busy = exists().where(
        StreamSession.meeting_id == Meeting.id,
        or_(
            StreamSession.ended_at > cutoff,
            and_(StreamSession.ended_at.is_(None), StreamSession.resume_expires_at > now),
        ),
    )
    recent = exists().where(CaptionSegment.meeting_id == Meeting.id, CaptionSegment.created_at > cutoff)
    query = select(Meeting.id).where(
        Meeting.kind == MeetingKind.DICTATION,
        Meeting.status == MeetingStatus.LIVE,
        or_(Meeting.started_at.is_(None), Meeting.started_at <= cutoff),
        ~busy,
        ~recent,
    )
    async with db.session() as session:
        ids = [i for i in (await session.execute(query)).scalars() if i not in connected()]
        if ids:
            await session.execute(
                update(Meeting)
                .where(Meeting.id.in_(ids), Meeting.status == MeetingStatus.LIVE)
                .values(status=MeetingStatus.ENDED, ended_at=now)
            )
    for meeting_id in ids:
        log.info("dictation_ended_idle", meeting_id=meeting_id, idle_s=idle_s)
    return ids


async def sweep_idle_dictations(db: Database, hub: LiveHub, interval_s: float) -> None:
    """Every ``interval_s``: end the dictations left live (runs until cancelled; a database error waits for
    the next round)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await end_idle_dictations(db, lambda: connected_meetings(hub))
        except SQLAlchemyError as exc:
            log.warning("dictation_sweep_failed", error=str(exc))
