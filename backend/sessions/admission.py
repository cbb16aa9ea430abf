"""WebSocket admission: origin, ticket and capacity checks before accept, and the slot a socket holds.

A slot is taken at the handshake, in the same step as the capacity check (no ``await`` between them, so
concurrent handshakes cannot all see room), and released when the socket's handler returns, whatever
ended it. The caps therefore count sockets that are streaming or about to, not only started sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.websockets import WebSocket

from backend.edge.logs import get_logger
from backend.edge.tickets import TICKET_PREFIX, Admission, redeem_ticket

if TYPE_CHECKING:
    from backend.services import Services

log = get_logger(__name__)
SUBPROTOCOL = "captions.v1"


async def admit(websocket: WebSocket, svc: Services) -> Admission | None:
    """Handshake checks before accept: origin (403), ticket (403), capacity (503). None = rejected.

    On success the caller holds a slot and must ``svc.hub.slots.release(admission.user_id)``."""
    origin = websocket.headers.get("origin")
    if origin not in svc.settings.allowed_origins:
        log.warning("ws_rejected", reason="origin", origin=origin)
        await websocket.close(code=1008)
        return None
    protocols = websocket.scope.get("subprotocols", [])
    tickets = [p[len(TICKET_PREFIX) :] for p in protocols if p.startswith(TICKET_PREFIX)]
    admission = await redeem_ticket(svc.db, tickets[0]) if SUBPROTOCOL in protocols and tickets else None
    if admission is None:
        log.warning("ws_rejected", reason="ticket")
        await websocket.close(code=1008)
        return None
    settings = svc.settings
    await svc.persist.recheck()
    if not svc.accepting_sessions() or not svc.hub.slots.try_take(
        admission.user_id, settings.max_sessions, settings.max_sessions_per_user
    ):
        log.warning("ws_rejected", reason="capacity", user_id=admission.user_id)
        svc.metrics.rejected_sessions.labels(reason="capacity").inc()
        await websocket.send_denial_response(Response("busy", status_code=503))
        return None
    return admission
