"""``/ws/view``: the read-only meeting view (subprotocol ``captions.view.v1``, docs/protocol.md).

A viewer socket first gets the meeting's stored finals on the meeting's clock
(``backend.meeting_view.timeline``),
then every new final and partial of every stream of the meeting, from any replica
(``backend.meeting_view.feed``).
It sends nothing but ``keepalive``; any other frame closes it 1008. It never slows a speaker: its events
wait in a bounded queue, and a viewer too slow to take them is closed 1013 ``too_slow``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from backend.db.models import CaptionSegment, Meeting
from backend.edge.logs import get_logger
from backend.edge.websocket import ProtocolViolation, parse_json
from backend.meeting_view.admission import VIEW_SUBPROTOCOL, ViewerAdmission, admit_viewer
from backend.meeting_view.feed import MeetingFeed
from backend.meeting_view.timeline import meeting_timeline
from backend.meeting_view.viewers import Channel, Partial, SpeakerStatus, Viewer
from backend.services import Services

log = get_logger(__name__)

LINK_MESSAGES = {
    "link_revoked": "this viewer link was revoked by the organiser",
    "link_expired": "this viewer link has expired; ask the organiser for a new one",
    "token_revoked": "the API token this view was opened with was revoked or expired",
}

SEND_TIMEOUT_S = 10.0
"""A send the client does not take within this long closes the viewer 1013 (its TCP window is full)."""


class ViewerGone(Exception):
    """The viewer's socket is closed or could not take a message in time."""


class MeetingViewerSocket:
    """One viewer: history, then the live feed; ``run`` returns when either side ends."""

    def __init__(self, websocket: WebSocket, svc: Services, admission: ViewerAdmission) -> None:
        self.ws = websocket
        self.svc = svc
        self.feed: MeetingFeed = svc.hub.feed
        self.admission = admission
        self.meeting_id = admission.meeting_id
        self._log = log.bind(meeting_id=self.meeting_id, link_id=admission.link_id, user_id=admission.user_id)

    async def run(self) -> None:
        await self.ws.accept(subprotocol=VIEW_SUBPROTOCOL)
        admission = self.admission
        viewer, channel = await self.feed.subscribe(
            self.meeting_id, admission.link_id, admission.api_token_id
        )
        self._log.info("viewer_connected", viewers=self.feed.viewers)
        reader = asyncio.create_task(self._reader(), name=f"viewer-reader-{self.meeting_id}")
        sender = asyncio.create_task(self._sender(viewer, channel), name=f"viewer-sender-{self.meeting_id}")
        try:
            done, _ = await asyncio.wait({reader, sender}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    self._log.error("viewer_failed", error=repr(task.exception()))
                    await self._close(1011, "internal error")
        finally:
            for task in (reader, sender):
                task.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)
            self.feed.unsubscribe(viewer)
            self._log.info("viewer_closed", skipped_partials=viewer.skipped_partials)

    async def _reader(self) -> None:
        """Take the client's frames: ``keepalive`` only; the socket is read-only."""
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            try:
                if text is None:
                    raise ProtocolViolation(1008, "the meeting view is read-only: no audio")
                kind = parse_json(text, self.svc.settings.max_json_depth).get("type")
                if kind != "keepalive":
                    raise ProtocolViolation(1008, f"the meeting view is read-only: {kind!r} not allowed")
            except ProtocolViolation as exc:
                await self._send_quietly({"type": "error", "code": exc.error_code, "message": str(exc)})
                await self._close(exc.code, str(exc))
                return

    async def _sender(self, viewer: Viewer, channel: Channel) -> None:
        try:
            if await self._history(viewer):
                await self._close(1000, "meeting ended")
                return
            await self._live(viewer, channel)
        except ViewerGone:
            return
        except SQLAlchemyError as exc:
            self._log.warning("viewer_storage_unavailable", error=type(exc).__name__)
            await self._send_quietly(
                {
                    "type": "error",
                    "code": "storage_unavailable",
                    "message": "captions cannot be read; reconnect",
                }
            )
            await self._close(1013, "captions cannot be read")

    async def _history(self, viewer: Viewer) -> bool:
        """Send ``ready`` and the stored finals; True when the meeting is over (nothing more will come)."""
        async with self.svc.db.session() as db:
            meeting = await db.get(Meeting, self.meeting_id)
            clock, finals = await meeting_timeline(db, self.meeting_id)
        if meeting is None:
            raise ViewerGone("the meeting was deleted")
        await self._send(
            {
                "type": "ready",
                "meeting": {
                    "id": meeting.id,
                    "title": meeting.title,
                    "kind": meeting.kind.value,
                    "status": meeting.status.value,
                    "started_at": clock.zero.isoformat() if clock.zero else None,
                },
                "speakers": [{"user_id": u, "name": n} for u, n in sorted(clock.names.items())],
                "live_partials": True,
                "poll_s": self.feed.poll_s if self.feed.bus is None else None,  # PostgreSQL: pushed
            }
        )
        for final in finals:
            viewer.mark_seen(final.session_id, final.seq)
            await self._send(final.message())
        ended = clock.status == "ended" and self.feed.streams_done(clock)
        await self._send({"type": "caught_up", "finals": len(finals), "ended": ended})
        if ended:
            await self._send({"type": "ended"})
        return ended

    async def _live(self, viewer: Viewer, channel: Channel) -> None:
        while True:
            events = await viewer.next()
            if viewer.dropped:
                self._log.warning("viewer_too_slow")
                await self._send_quietly(
                    {
                        "type": "error",
                        "code": "too_slow",
                        "message": "this connection fell behind; reconnecting",
                    }
                )
                await self._close(1013, "viewer too slow")
                return
            for kind, payload in events:
                if await self._deliver(viewer, channel, kind, payload):
                    await self._close(1000, "meeting ended")
                    return

    async def _deliver(self, viewer: Viewer, channel: Channel, kind: str, payload: Any) -> bool:
        """Send one event; True when it was the meeting's end."""
        if kind == "final" and isinstance(payload, CaptionSegment):
            if viewer.mark_seen(payload.session_id, payload.seq):
                message = await self.feed.place(channel, payload)
                if message is not None:
                    await self._send(message)
        elif kind == "partial" and isinstance(payload, Partial):
            await self._send(await self.feed.partial_message(channel, payload))
        elif kind == "status" and isinstance(payload, SpeakerStatus):
            await self._send(await self.feed.status_message(channel, payload))
        elif kind == "speaker":
            await self._send({"type": "speaker", **payload})
        elif kind == "refused":
            await self._send(
                {"type": "error", "code": payload, "message": LINK_MESSAGES.get(payload, payload)}
            )
            await self._close(1008, payload)
            raise ViewerGone(payload)
        elif kind == "restart":
            await self._send({"type": "reconnect", "reason": "server restarting"})
            await self._close(1012, "server restarting")
            raise ViewerGone("restart")
        elif kind == "ended":
            await self._send({"type": "ended"})
            return True
        return False

    async def _send(self, message: dict[str, Any]) -> None:
        if self.ws.application_state != WebSocketState.CONNECTED:
            raise ViewerGone("closed")
        try:
            await asyncio.wait_for(self.ws.send_text(json.dumps(message)), timeout=SEND_TIMEOUT_S)
        except TimeoutError as exc:
            self._log.warning("viewer_send_timeout")
            await self._close(1013, "viewer too slow")
            raise ViewerGone("too slow") from exc
        except (WebSocketDisconnect, RuntimeError) as exc:
            raise ViewerGone("disconnected") from exc

    async def _send_quietly(self, message: dict[str, Any]) -> None:
        try:
            await self._send(message)
        except ViewerGone:
            return

    async def _close(self, code: int, reason: str) -> None:
        if self.ws.application_state == WebSocketState.CONNECTED:
            try:
                await self.ws.close(code=code, reason=reason[:120])
            except (RuntimeError, WebSocketDisconnect):
                return  # the client closed first


async def viewer_endpoint(websocket: WebSocket) -> None:
    """``/ws/view``: the read-only meeting view."""
    svc: Services = websocket.app.state.services
    admission = await admit_viewer(websocket, svc)
    if admission is None:
        return
    try:
        await MeetingViewerSocket(websocket, svc, admission).run()
    finally:
        svc.hub.viewer_slots.release(admission.link_id, admission.client)
