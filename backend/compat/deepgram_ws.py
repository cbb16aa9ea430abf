"""A Deepgram-compatible live socket (issue 47): ``/v1/listen``, spoken to by Deepgram's own client
libraries. Parameters come in the query (``backend.compat.listen_params``); the key is one of our API
tokens, as ``Authorization: Token <key>`` (or ``Bearer``) or, from a browser, the subprotocols
``token, <key>``. Audio is linear16 in frames of any size; text frames are ``KeepAlive``, ``Finalize`` and
``CloseStream``. Answers are ``Results``, ``SpeechStarted``, ``UtteranceEnd``, ``Metadata`` and ``Error``.

A stream opened here is a live session like any other (``backend.sessions.ws.CaptionSession`` with this
wire format): the caps, the degradation ladder, ``/metrics``, revoked tokens ending it, and its finals
persisted before they are sent, into a dictation owned by the token's owner (its transcript). Its
``keyterm``/``keywords`` are that stream's own vocabulary, compiled, cached and registered like a
meeting's."""

from __future__ import annotations

import asyncio
import re
import string
import time
from collections.abc import MutableMapping
from typing import Any

import structlog
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from backend.api.deps import Principal, api_token_principal
from backend.compat.files import TermsRejected, check_terms
from backend.compat.listen_params import ListenError, ListenParams, parse_listen
from backend.compat.openai_api import MODEL_ID
from backend.db.models import CaptionSegment, Meeting, MeetingKind, MeetingStatus, utcnow
from backend.edge.errors import ApiError
from backend.edge.logs import get_logger
from backend.edge.tickets import Admission
from backend.edge.websocket import ProtocolViolation, parse_json
from backend.engine.types import InputLevel
from backend.services import Services
from backend.sessions.protocol import SessionState
from backend.sessions.ws import CaptionSession
from backend.text.vocab import VocabularyTerm
from backend.text.written_form import to_written

log = get_logger(__name__)
TOKEN_SUBPROTOCOL = "token"
"""Deepgram's browser auth: subprotocols ``["token", key]``; only ``token`` is echoed."""
MODEL_UUID = "00000000-0000-4000-8000-000000000047"
MODEL_INFO = {"name": MODEL_ID, "version": "1", "arch": "fastconformer-transducer"}
_MARKS = re.compile(f"[{re.escape(string.punctuation.replace(chr(39), ''))}]")


class DeepgramSession(CaptionSession):
    """One ``/v1/listen`` socket: a caption session speaking Deepgram's messages."""

    def __init__(
        self,
        websocket: WebSocket,
        svc: Services,
        admission: Admission,
        params: ListenParams,
        terms: list[VocabularyTerm],
        subprotocol: str | None,
    ) -> None:
        super().__init__(websocket, svc, admission)
        self.params = params
        self._terms = terms
        self._subprotocol = subprotocol
        self._pending = bytearray()  # audio not yet a whole chunk (the reader's)
        self._from_finalize = False
        self._speaking = False  # SpeechStarted was sent for the current utterance

    async def _accept(self) -> None:
        await self.ws.accept(subprotocol=self._subprotocol)
        # A Deepgram client sends audio as soon as the socket opens (no ready message to wait for), while
        # the stream's keyterms may still compile: its real-time budget runs from here, not from the first
        # chunk read after the compile, or audio sent at real time would read as a burst (1008).
        self._first_audio = time.monotonic()

    async def _begin(self) -> None:
        """No start message: the query said everything. A new session in a new dictation, the stream's
        keyterms registered before its first chunk."""
        self.chunk_s = min(self.svc.settings.allowed_chunk_s)
        self.chunk_bytes = 2 * self.svc.engine.chunk_samples(self.chunk_s)
        await self._open_session({}, (None, None))
        self._log = log.bind(session_id=self.session_id, meeting_id=self.meeting_id)
        self.live = await self.svc.hub.open_meeting(self.meeting_id)
        self._vocabulary.start(self.live)
        self._stream = self.svc.engine.open_stream(self._options(self.live.handle))
        self.svc.hub.join(self, self.live)
        if self._terms:
            await self._vocabulary.configure(self._terms, self.live, self._stream)
        self._to(SessionState.STREAMING)
        self.svc.hub.feed.publish_status(self, "live")
        self.svc.metrics.sessions.inc()
        self._log.info("session_started", protocol="deepgram", terms=len(self._terms))

    # ----- reader: frames of any size, Deepgram's control messages -------------------------------------
    async def _reader(self) -> None:
        try:
            while True:
                message = await self._receive_or_idle()
                if message is None:
                    return
                data = message.get("bytes")
                if data is not None:
                    if len(data) > self.svc.settings.max_ws_message_bytes:
                        raise ProtocolViolation(1009, "frame too large")
                    self._pending += data
                    if not self._queue_whole_chunks():
                        await self._discard_until_closed()
                        return
                    continue
                text = message.get("text")
                if text is not None and not self._control(parse_json(text, self.svc.settings.max_json_depth)):
                    return
        except ProtocolViolation as exc:
            self._queue.put_nowait(("violation", exc))
            await self._discard_until_closed()
        except Exception as exc:  # the consumer must hear of it, or the session would never end
            self._log.exception("reader_failed", error=type(exc).__name__)
            self._queue.put_nowait(("failed", exc))

    async def _receive_or_idle(self) -> MutableMapping[str, Any] | None:
        """The next frame; None when the client left or idled (both queued for the consumer)."""
        settings = self.svc.settings
        try:
            message = await asyncio.wait_for(self.ws.receive(), timeout=settings.idle_timeout_s)
        except TimeoutError:
            self._queue.put_nowait(
                ("violation", ProtocolViolation(1011, "no audio or KeepAlive: idle timeout"))
            )
            return None
        if message["type"] == "websocket.disconnect":
            self._queue.put_nowait(("gone", message.get("code")))
            return None
        if time.monotonic() - self.started_monotonic > settings.max_session_s:
            raise ProtocolViolation(1008, "maximum session length")
        return message

    def _queue_whole_chunks(self, pad: bool = False) -> bool:
        """Queue every whole chunk of the pending audio (``pad``: the rest too, padded with silence)."""
        if pad and len(self._pending) % self.chunk_bytes:
            self._pending += bytes(self.chunk_bytes - len(self._pending) % self.chunk_bytes)
        while len(self._pending) >= self.chunk_bytes:
            chunk = bytes(self._pending[: self.chunk_bytes])
            del self._pending[: self.chunk_bytes]
            if not self._queue_chunk(chunk):
                return False
        return True

    def _control(self, request: dict[str, Any]) -> bool:
        """A text frame: False when the reader is done (CloseStream)."""
        kind = request.get("type")
        if kind == "KeepAlive":
            return True
        if kind not in ("Finalize", "CloseStream"):
            raise ProtocolViolation(
                1008, f"unknown message type {kind!r}: KeepAlive, Finalize or CloseStream"
            )
        if not self._queue_whole_chunks(pad=True):
            self._queue.put_nowait(("busy", None))
            return False
        if kind == "Finalize":
            self._queue.put_nowait(("finalize", None))
            return True
        self._queue.put_nowait(("stop", None))
        return False

    # ----- consumer: Deepgram's messages -----------------------------------------------------------------
    async def _finalize(self) -> None:
        """Finalize: what was sent so far becomes finals (``from_finalize``); a new engine stream goes on."""
        if self._stream is None or self.live is None:
            return
        result = await self._stream.finish()
        self._stream = None
        committed, self._from_finalize = self.finals, True
        try:
            for final in result.finals:
                await self._commit(final)
        finally:
            self._from_finalize = False
        if self.finals == committed:  # nothing was said: the client still hears that Finalize is done
            await self._send(
                self._results("", [], self.decoded_s, self.decoded_s, final=True, from_finalize=True)
            )
        self.stream_start_s = self.decoded_s
        self._stream = self.svc.engine.open_stream(self._options(self._vocabulary.handle))

    async def _send_input_level(self, level: InputLevel) -> None:
        """Deepgram's protocol has no level message: the level is still judged, the gain applied and the
        change counted (``CaptionSession._deliver``), only never sent to a client that would not know it."""

    async def _send_load(self, load: dict[str, Any]) -> None:
        """Nor a load message: a Deepgram SDK cannot parse one (it hands its caller ``None``). The ladder
        still acts on this stream (the second pass off, shedding ends it with ``busy``)."""

    async def _send_reconnect(self, reason: str) -> None:
        """Nor ``reconnect``: a draining replica flushes this stream's finals, sends Metadata and closes
        with 1012 (service restart), which Deepgram's clients already treat as "connect again"."""

    async def _send_partial(self, partial: str) -> None:
        text, _ = self._vocabulary.current.apply(partial.strip())
        start_s = self._utterance_start_s()
        if text and not self._speaking:
            self._speaking = True
            if self.params.vad_events:
                await self._send({"type": "SpeechStarted", "channel": [0], "timestamp": round(start_s, 3)})
        if self.params.interim_results:
            await self._send(self._results(self._styled(text, []), [], start_s, self.decoded_s, final=False))

    async def _send_final(self, segment: CaptionSegment, audio_end_s: float, source: str) -> None:
        words = segment.words or []
        matched = segment.matched_terms or []
        start_s = self._utterance_start_s()
        message = self._results(
            self._styled(segment.text, matched),
            words,
            start_s,
            max(start_s, segment.end_s),
            final=True,
            from_finalize=self._from_finalize,
        )
        self._last_final_end_s = segment.end_s
        self._speaking = False
        await self._send(message)
        if self.params.utterance_end_ms is not None:
            await self._send({"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": segment.end_s})

    def _utterance_start_s(self) -> float:
        return getattr(self, "_last_final_end_s", 0.0)

    def _styled(self, text: str, matched: list[str]) -> str:
        """``smart_format``: our written form; without ``punctuate``: lower case, no marks (Deepgram's)."""
        if self.params.smart_format:
            return to_written(text, matched)
        if not self.params.punctuate:
            return " ".join(_MARKS.sub("", text).lower().split())
        return text

    def _results(
        self,
        transcript: str,
        words: list[dict[str, Any]],
        start_s: float,
        end_s: float,
        *,
        final: bool,
        from_finalize: bool = False,
    ) -> dict[str, Any]:
        return {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(max(0.0, end_s - start_s), 3),
            "start": round(start_s, 3),
            "is_final": final,
            "speech_final": final and not from_finalize,
            "from_finalize": from_finalize,
            "channel": {
                "alternatives": [
                    {
                        "transcript": transcript,
                        "confidence": 1.0 if transcript else 0.0,
                        "words": [self._word(w) for w in words],
                    }
                ]
            },
            "metadata": {"request_id": self.session_id, "model_info": MODEL_INFO, "model_uuid": MODEL_UUID},
        }

    def _word(self, word: dict[str, Any]) -> dict[str, Any]:
        shown = str(word.get("text", ""))
        plain = " ".join(_MARKS.sub("", shown).lower().split()) or shown.lower()
        return {
            "word": plain,
            "start": word.get("start_s", 0.0),
            "end": word.get("end_s", 0.0),
            "confidence": 1.0,
            "punctuated_word": shown if self.params.punctuate or self.params.smart_format else plain,
        }

    async def _send_error(self, code: str, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        body: dict[str, Any] = {"type": "Error", "variant": code, "description": message, "message": message}
        if errors is not None:
            body["errors"] = errors
        await self._send(body)

    async def _finish_and_close(
        self, code: int, reason: str, error_code: str | None = None, stopped: bool = False, busy: bool = False
    ) -> None:
        if self._stream is not None:
            result = await self._stream.finish()
            self._stream = None
            for final in result.finals:
                await self._commit(final)
        if error_code is not None:
            await self._send_error(error_code, reason)
        if busy:
            self.svc.metrics.rejected_sessions.labels(reason="busy").inc()
            await self._send_error("busy", "the server is overloaded; try again shortly")
        await self._send(self._metadata())
        await self._close(code, reason)

    def _metadata(self) -> dict[str, Any]:
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.session_id,
            "sha256": "",
            "created": self.started_at.isoformat(),
            "duration": round(self.decoded_s, 3),
            "channels": 1,
            "models": [MODEL_UUID],
            "model_info": {MODEL_UUID: MODEL_INFO},
        }


# ----- handshake ---------------------------------------------------------------------------------------
def _key(websocket: WebSocket) -> tuple[str | None, str | None]:
    """The API key and the subprotocol to echo: ``Authorization: Token|Bearer <key>``, or ``token, <key>``."""
    header = websocket.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip(), None
    protocols = websocket.scope.get("subprotocols", [])
    if len(protocols) == 2 and protocols[0].lower() == TOKEN_SUBPROTOCOL:
        return protocols[1], protocols[0]
    return None, None


async def _refuse(websocket: WebSocket, status: int, code: str, message: str, **extra: Any) -> None:
    """A refused handshake: the HTTP status and Deepgram's error body (``err_code``, ``err_msg``)."""
    log.warning("listen_rejected", reason=code, status=status)
    body = {"err_code": code, "err_msg": message, "request_id": "", **extra}
    await websocket.send_denial_response(
        JSONResponse(body, status_code=status, headers={"dg-error": message})
    )


async def _authorize(websocket: WebSocket, svc: Services) -> Principal | None:
    origin = websocket.headers.get("origin")
    if origin is not None and origin not in svc.settings.allowed_origins:  # a browser of another site
        await _refuse(websocket, 403, "FORBIDDEN_ORIGIN", "origin not allowed")
        return None
    key, _ = _key(websocket)
    if key is None:
        await _refuse(websocket, 401, "INVALID_AUTH", "missing API key: Authorization: Token <API token>")
        return None
    try:
        return await api_token_principal(svc, key)
    except ApiError as exc:
        await _refuse(
            websocket,
            exc.status,
            "INVALID_AUTH" if exc.status == 401 else "INSUFFICIENT_PERMISSIONS",
            exc.message,
        )
        return None


async def _new_dictation(svc: Services, principal: Principal) -> int:
    """The transcript this stream is stored in: a dictation of the token's owner."""
    async with svc.db.session() as db:
        meeting = Meeting(
            kind=MeetingKind.DICTATION,
            title=f"Live stream by {principal.username}",
            owner_id=principal.user_id,
            chunk_ms=round(min(svc.settings.allowed_chunk_s) * 1000),
            decoding=svc.settings.default_decoding,
            vocabularies=[],
        )
        db.add(meeting)
        await db.flush()
        return meeting.id


async def _end_dictation(svc: Services, meeting_id: int) -> None:
    async with svc.db.session() as db:
        meeting = await db.get(Meeting, meeting_id)
        if meeting is not None and meeting.status != MeetingStatus.ENDED:
            meeting.status, meeting.ended_at = MeetingStatus.ENDED, utcnow()
    await svc.hub.close_meeting(meeting_id, "stream ended")


async def listen_endpoint(websocket: WebSocket) -> None:
    """``/v1/listen``: Deepgram's live transcription socket."""
    svc: Services = websocket.app.state.services
    principal = await _authorize(websocket, svc)
    if principal is None:
        return
    try:
        params = parse_listen(websocket.query_params)
        terms = await check_terms(svc, params.term_items())
    except ListenError as exc:
        await _refuse(websocket, 400, "INVALID_QUERY_PARAMETER", str(exc))
        return
    except TermsRejected as exc:
        rejected = [e.as_dict("index") for e in exc.errors]
        await _refuse(websocket, 400, "INVALID_QUERY_PARAMETER", f"keyterm: {exc}", errors=rejected)
        return
    settings = svc.settings
    await svc.persist.recheck()
    if not svc.accepting_sessions() or not svc.hub.slots.try_take(
        principal.user_id, settings.max_sessions, settings.max_sessions_per_user
    ):
        svc.metrics.rejected_sessions.labels(reason="capacity").inc()
        await _refuse(websocket, 503, "SERVICE_UNAVAILABLE", "busy: too many live streams; retry shortly")
        return
    meeting_id: int | None = None
    try:
        meeting_id = await _new_dictation(svc, principal)
        admission = Admission(principal.user_id, principal.username, meeting_id, principal.token_id)
        structlog.contextvars.bind_contextvars(meeting_id=meeting_id)
        _, subprotocol = _key(websocket)
        await DeepgramSession(websocket, svc, admission, params, terms, subprotocol).run()
    finally:
        svc.hub.slots.release(principal.user_id)
        if meeting_id is not None:
            await _end_dictation(svc, meeting_id)
        structlog.contextvars.clear_contextvars()
