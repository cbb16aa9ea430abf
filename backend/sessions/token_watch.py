"""Sockets opened with an API token's tickets end when the token stops working (revoked or expired).

Revoking on this replica ends them at once (``backend.api.auth.revoke_token``); ``watch_api_tokens`` finds
the tokens revoked on another replica, or expired, within ``interval_s`` by asking SQL which of the tokens
behind this replica's sockets still work.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import or_, select
from sqlalchemy.exc import SQLAlchemyError

from backend.db.models import ApiToken, utcnow
from backend.db.session import Database
from backend.edge.logs import get_logger
from backend.sessions.live import LiveHub

log = get_logger(__name__)


async def working_tokens(db: Database, token_ids: set[int]) -> set[int]:
    """Those of ``token_ids`` that are neither revoked nor expired (a deleted one is not working)."""
    async with db.session() as session:
        rows = await session.execute(
            select(ApiToken.id).where(
                ApiToken.id.in_(token_ids),
                ApiToken.revoked_at.is_(None),
                or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow()),
            )
        )
        return set(rows.scalars())


async def watch_api_tokens(db: Database, hub: LiveHub, interval_s: float) -> None:
    """Every ``interval_s``: end the sockets of the tokens that stopped working (runs until cancelled)."""
    while True:
        await asyncio.sleep(interval_s)
        token_ids = hub.api_token_ids()
        if not token_ids:
            continue
        try:
            stopped = token_ids - await working_tokens(db, token_ids)
        except SQLAlchemyError as exc:  # the database is away: look again next time
            log.warning("token_watch_failed", error=type(exc).__name__)
            continue
        for token_id in stopped:
            log.info("token_sockets_ended", token_id=token_id)
            hub.end_for_token(token_id)
