"""Admission of the read-only meeting view (``/ws/view``): origin, a signed-in viewer's ticket or a viewer
link, draining, and the viewer slot a socket holds (per replica, per link, per client address)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sqlalchemy import select
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from backend.db.models import ViewerLink, utcnow
from backend.db.session import as_utc
from backend.edge.logs import get_logger
from backend.edge.security import token_hash
from backend.edge.tickets import TICKET_PREFIX, redeem_ticket

if TYPE_CHECKING:
    from backend.services import Services

log = get_logger(__name__)
VIEW_SUBPROTOCOL = "captions.view.v1"
LINK_PREFIX = "link."


@dataclass(frozen=True)
class ViewerAdmission:
    """What the read-only meeting view may see: one meeting, for a user (ticket) or a viewer link."""

    meeting_id: int
    user_id: int | None = None
    link_id: int | None = None
    client: str = "-"
    api_token_id: int | None = None


class LinkRefused(Exception):
    """A viewer link that is unknown, revoked or expired; ``code`` says which (the page shows it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


VIEWER_LIMITS = {
    "replica": "this server has as many meeting viewers as it can take",
    "link": "this view-only link is open in as many places as it may be",
    "client": "too many meeting views are open from your address",
}


async def admit_viewer(websocket: WebSocket, svc: Services) -> ViewerAdmission | None:
    """Handshake checks of ``/ws/view``: origin (403), a ticket or a viewer link (403), draining (503), then
    a viewer slot (per replica, per link, per client address: accepted only to say which cap refused it,
    ``error`` ``too_many_viewers`` + 1013). None = rejected. Viewers hold no speaking slot.

    On success the caller holds a viewer slot and must ``svc.hub.viewer_slots.release(link_id, client)``."""
    origin = websocket.headers.get("origin")
    if origin not in svc.settings.allowed_origins:
        log.warning("view_rejected", reason="origin", origin=origin)
        await websocket.close(code=1008)
        return None
    protocols = websocket.scope.get("subprotocols", [])
    tickets = [p[len(TICKET_PREFIX) :] for p in protocols if p.startswith(TICKET_PREFIX)]
    links = [p[len(LINK_PREFIX) :] for p in protocols if p.startswith(LINK_PREFIX)]
    admission: ViewerAdmission | None = None
    if VIEW_SUBPROTOCOL in protocols and tickets:
        granted = await redeem_ticket(svc.db, tickets[0])
        admission = (
            ViewerAdmission(granted.meeting_id, user_id=granted.user_id, api_token_id=granted.api_token_id)
            if granted
            else None
        )
    elif VIEW_SUBPROTOCOL in protocols and links:
        try:
            admission = await redeem_viewer_link(svc, links[0])
        except LinkRefused as exc:
            log.warning("view_rejected", reason=exc.code)
    if admission is None:
        log.warning("view_rejected", reason="credentials")
        await websocket.close(code=1008)
        return None
    if svc.hub.draining:
        log.warning("view_rejected", reason="draining")
        await websocket.send_denial_response(Response("busy", status_code=503))
        return None
    client = websocket.client.host if websocket.client else "-"
    settings = svc.settings
    caps = (settings.max_viewers, settings.max_viewers_per_link, settings.max_viewers_per_client)
    refused = svc.hub.viewer_slots.try_take(admission.link_id, client, caps)
    if refused is not None:
        await _refuse_viewer(websocket, svc, refused)
        return None
    return replace(admission, client=client)


async def _refuse_viewer(websocket: WebSocket, svc: Services, limit: str) -> None:
    """Tell a viewer which cap refused it (a browser sees no handshake status), then close 1013."""
    log.warning("view_rejected", reason="capacity", limit=limit)
    svc.metrics.rejected_sessions.labels(reason=f"viewers_{limit}").inc()
    message = VIEWER_LIMITS[limit] + "; try again later"
    try:
        await websocket.accept(subprotocol=VIEW_SUBPROTOCOL)
        await websocket.send_text(
            json.dumps({"type": "error", "code": "too_many_viewers", "limit": limit, "message": message})
        )
        await websocket.close(code=1013, reason="too many viewers")
    except (WebSocketDisconnect, RuntimeError):
        return  # the client left first


LINK_LAST_USED_STEP_S = 60.0
"""``viewer_links.last_used_at`` is rewritten at most once a minute per link."""


async def redeem_viewer_link(svc: Services, token: str) -> ViewerAdmission:
    """The meeting a viewer link opens (LinkRefused: unknown, revoked or expired). Links are reusable
    until they expire or are revoked; only their hash is stored."""
    now = utcnow()
    async with svc.db.session() as db:
        link = (
            await db.execute(select(ViewerLink).where(ViewerLink.token_hash == token_hash(token)))
        ).scalar_one_or_none()
        if link is None:
            raise LinkRefused(
                "link_unknown", "this viewer link is not valid; ask the organiser for a new one"
            )
        if link.revoked_at is not None:
            raise LinkRefused("link_revoked", "this viewer link was revoked by the organiser")
        if as_utc(link.expires_at) <= now:
            raise LinkRefused("link_expired", "this viewer link has expired; ask the organiser for a new one")
        if (
            link.last_used_at is None
            or (now - as_utc(link.last_used_at)).total_seconds() >= LINK_LAST_USED_STEP_S
        ):
            link.last_used_at = now
        return ViewerAdmission(link.meeting_id, link_id=link.id)
