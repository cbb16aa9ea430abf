"""A caption session's state, shared by its parts (``backend.sessions.ws``): who it is, where its audio
stands (received, decoded, resent after a resume), its legal state changes and how it writes to its socket."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from backend.db.models import utcnow
from backend.edge.logs import get_logger
from backend.edge.tickets import Admission
from backend.engine.contract import CaptionStream
from backend.services import Services
from backend.sessions.caption_store import CaptionStore
from backend.sessions.live import LiveMeeting
from backend.sessions.protocol import ALLOWED_TRANSITIONS, SessionState
from backend.sessions.vocabulary import SessionVocabulary

log = get_logger("backend.sessions.ws")


class SessionCore:
    """The state of one socket's session (the event loop's; the reader and consumer tasks share it)."""

    def __init__(self, websocket: WebSocket, svc: Services, admission: Admission) -> None:
        self.ws = websocket
        self.svc = svc
        self.user_id = admission.user_id
        self.username = admission.username
        self.meeting_id = admission.meeting_id
        self.api_token_id = admission.api_token_id  # its sockets end when that token is revoked
        self.session_id = ""
        self.resume_token_hash = ""
        self.generation = 0
        self.state = SessionState.CONNECTING
        self.live: LiveMeeting | None = None
        self.chunk_s = 0.0
        self.chunk_bytes = 0
        self.seq = 0
        self.utterance = 0
        self.audio_offset_s = 0.0  # where this connection's audio starts on the session's clock
        self.stream_start_s = 0.0  # where the engine stream's clock starts in this connection's audio
        self.resend_s = 0.0  # audio the client sends again at once after `ready` (its backlog), seconds
        self._not_captioned: dict[str, float] | None = None  # audio of a resumed session no one will decode
        self._catching_up = False  # a resumed client's backlog is not decoded yet
        self.received_s = 0.0
        self._first_audio: float | None = None  # when the first chunk arrived (monotonic), for the rate
        self.decoded_s = 0.0
        self.partials = 0
        self.finals = 0
        self.started_monotonic = time.monotonic()
        self.started_at = utcnow()
        self.last_partial = ""
        self.input_level = "ok"  # the last input_level state sent (the engine's level meter)
        self._store = CaptionStore(svc.db, svc.settings.resume_ttl_s)
        self._vocabulary = SessionVocabulary(svc.hub.compile)
        self._stream: CaptionStream | None = None
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._end_request: tuple[int, str] | None = None
        self._end_error: str | None = None
        self._done = asyncio.Event()
        self._log = log
        self._shed = False  # the degradation ladder closes this session after the chunk being decoded
        self._chunks_delivered = 0
        self._tells: set[asyncio.Task[None]] = set()

    # ----- lifecycle -------------------------------------------------------------------------------
    def _to(self, state: SessionState) -> None:
        if state not in ALLOWED_TRANSITIONS[self.state]:
            raise RuntimeError(f"expected a state reachable from {self.state.value}, got {state.value}")
        self.state = state

    @property
    def lag_s(self) -> float:
        """Audio received minus audio decoded, seconds."""
        return max(0.0, self.received_s - self.decoded_s)

    @property
    def overdue_s(self) -> float:
        """The lag that counts against the session (busy at ``lag_busy_s``) and the replica (readiness): the
        backlog a resumed client sent again is excused until the stream has caught up once."""
        return max(0.0, self.lag_s - self.resend_s) if self._catching_up else self.lag_s

    def _caught_up(self) -> bool:
        """A resumed client's backlog is decoded and the stream has caught up with what arrived since.
        Caught up alone is not enough: over a real link the first backlog chunk is decoded before the rest
        arrives, and the rest would then count as lag (issue 36 item 3)."""
        return self._catching_up and self.decoded_s >= self.resend_s - 1e-6 and self.lag_s <= self.chunk_s

    async def _send(self, message: dict[str, Any]) -> None:
        if self.ws.application_state == WebSocketState.CONNECTED:
            try:
                await self.ws.send_text(json.dumps(message))
            except (WebSocketDisconnect, RuntimeError):
                self._log.info("send_after_disconnect", type=message.get("type"))

    async def _send_error(self, code: str, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        body: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if errors is not None:
            body["errors"] = errors
        await self._send(body)
