"""WebSocket protocol v1 (docs/protocol.md): the state machine of one caption session per socket.

A session has two tasks: the reader receives frames, enforces size, rate and idle limits and queues work;
the consumer pushes one chunk at a time to the engine (at most one in flight), persists every final
BEFORE sending it, and owns the socket's closing. Lifecycle: connecting -> authenticated -> streaming
-> draining -> closed (``backend.sessions.protocol.SessionState``).

Its parts: ``core`` (the state), ``reader`` (the reader task), ``opening`` (a new session or a resume).
Around it: ``admission`` (origin, ticket and caps before accept), ``caption_store`` (the session's row,
caption numbering, persist-before-send, replay), ``vocabulary`` (the meeting's terms plus the client's
``configure`` terms), ``live`` (the meetings and sessions live on this replica).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import structlog
from sqlalchemy.exc import SQLAlchemyError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from backend.db.models import CaptionSegment
from backend.edge.logs import get_logger
from backend.edge.security import token_hash
from backend.edge.websocket import ProtocolViolation, parse_json
from backend.engine.contract import VocabularyRef
from backend.engine.errors import EngineError
from backend.engine.types import InputLevel, StepResult, StreamOptions
from backend.services import Services
from backend.sessions import resume
from backend.sessions.admission import SUBPROTOCOL, admit
from backend.sessions.caption_store import Superseded, final_message
from backend.sessions.ladder import Rung
from backend.sessions.opening import SessionOpening
from backend.sessions.persist import PersistFailed, with_retries
from backend.sessions.protocol import INPUT_LEVEL_MESSAGES, SessionState, held_audio
from backend.sessions.reader import SessionReader
from backend.sessions.vocabulary import TooManyTerms, validate_session_terms

log = get_logger(__name__)


class CaptionSession(SessionOpening, SessionReader):
    """One socket's streaming session. See the module docstring for the task split; its state is
    ``SessionCore``'s, its reader ``SessionReader``'s, the resume ``SessionOpening``'s."""

    async def run(self) -> None:
        """Accept, read ``start``, stream until stop/close/drain; always release what it holds.

        Supervised: an unexpected exception in either task ends the session like a decoder failure
        (``error`` ``internal``, finals flushed where the stream still works, close 1011); the reader
        never outlives this call."""
        await self._accept()
        self._to(SessionState.AUTHENTICATED)
        reader: asyncio.Task[None] | None = None
        try:
            try:
                await self._begin()
            except ProtocolViolation as exc:
                await self._send_error(exc.error_code, str(exc))
                await self._close(exc.code, str(exc))
                return
            except WebSocketDisconnect:
                return
            reader = asyncio.create_task(self._reader(), name=f"reader-{self.session_id}")
            await self._consume()
            # Keep reading (and discarding) until the client answers the close: frames it had already sent
            # would otherwise fill uvicorn's queue and stall the close handshake.
            await asyncio.wait_for(asyncio.shield(reader), timeout=5.0)
        except TimeoutError:
            pass
        except Exception as exc:
            self._log.exception("session_failed", error=type(exc).__name__)
            await self._fail()
        finally:
            if reader is not None:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            await self._cleanup()

    async def _accept(self) -> None:
        """Accept the socket with the protocol's subprotocol (never echoing a ticket)."""
        await self.ws.accept(subprotocol=SUBPROTOCOL)

    def shed(self) -> None:
        """The degradation ladder's top rung (``backend.sessions.ladder``): close busy after the current
        chunk."""
        if self.state is SessionState.STREAMING and not self._shed:
            self._shed = True
            self._queue.put_nowait(("busy", None))  # wakes a consumer waiting for audio

    def tell_load(self, load: dict[str, Any]) -> None:
        """Tell the client the replica's load (a ``load`` message), without waiting for the decoder."""
        if self.state is not SessionState.STREAMING:
            return
        task = asyncio.create_task(self._send_load(load))
        self._tells.add(task)
        task.add_done_callback(self._tells.discard)

    async def end(self, code: int, reason: str, error_code: str | None = None) -> None:
        """Ask the session to finish (drain, meeting end, admin, a revoked API token): finals are flushed,
        the client is told ``error_code`` if given, then it closes."""
        if self.state in (SessionState.STREAMING, SessionState.AUTHENTICATED):
            self._end_request = (code, reason)
            self._end_error = error_code
            self._queue.put_nowait(("end", None))
        await self._done.wait()

    # ----- start / resume ----------------------------------------------------------------------------
    async def _begin(self) -> None:
        try:
            first = await asyncio.wait_for(self.ws.receive(), timeout=self.svc.settings.idle_timeout_s)
        except TimeoutError as exc:
            raise ProtocolViolation(1008, "no start message") from exc
        if first["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(first.get("code", 1000))
        if first.get("text") is None:
            raise ProtocolViolation(1008, "expected a start message, got a binary frame")
        message = parse_json(first["text"], self.svc.settings.max_json_depth)
        if message.get("type") != "start":
            raise ProtocolViolation(1008, f"expected a start message, got {message.get('type')!r}")
        chunk_s = message.get("chunk_s")
        if chunk_s not in self.svc.settings.allowed_chunk_s:
            raise ProtocolViolation(1008, f"chunk_s must be one of {self.svc.settings.allowed_chunk_s}")
        self.chunk_s = float(chunk_s)
        self.chunk_bytes = 2 * self.svc.engine.chunk_samples(self.chunk_s)
        held = held_audio(message)
        token = message.get("resume_token")
        try:
            with self.svc.hub.resumes.hold(token_hash(token) if isinstance(token, str) else None):
                resume_token, replay = await self._open_session(message, held)
                self._log = log.bind(session_id=self.session_id, meeting_id=self.meeting_id)
                self.live = await self.svc.hub.open_meeting(self.meeting_id)
                self._vocabulary.start(self.live)
                self._stream = self.svc.engine.open_stream(self._options(self.live.handle))
                self.svc.hub.join(self, self.live)
        except resume.ResumeConflict as exc:
            raise ProtocolViolation(1013, f"{exc}; retry shortly", "resume_conflict") from exc
        self._to(SessionState.STREAMING)
        self.svc.hub.feed.publish_status(self, "live")  # to the meeting view (issue 39)
        self.svc.metrics.sessions.inc()
        self._log.info("session_started", resumed=bool(message.get("resume_token")), chunk_s=self.chunk_s)
        await self._send(
            {
                "type": "ready",
                "session_id": self.session_id,
                "resume_token": resume_token,
                "chunk_s": self.chunk_s,
                "chunk_samples": self.chunk_bytes // 2,
                "sample_rate": 16000,
                "resume_from_s": self.audio_offset_s,
                **({"not_captioned": self._not_captioned} if self._not_captioned else {}),
                "meeting": {"id": self.live.meeting_id, "title": self.live.title, "kind": self.live.kind},
                "vocabulary_version": self.live.version,
                "terms": sorted({e.shown for e in self.live.vocabulary.entries}),
                "load": self.svc.ladder.snapshot(),
            }
        )
        for segment in replay:
            await self._send(final_message(segment))

    def _options(self, handle: VocabularyRef | None) -> StreamOptions:
        decoding = self.live.decoding if self.live else self.svc.settings.default_decoding
        if decoding == "beam" and self.svc.ladder.rung >= Rung.GREEDY_FOR_NEW:
            # the ladder's second rung: new sessions decode greedy (backend.sessions.ladder)
            decoding = "greedy"
        return StreamOptions(chunk_s=self.chunk_s, decoding=decoding, vocabulary=handle)

    # ----- consumer --------------------------------------------------------------------------------
    async def _consume(self) -> None:
        try:
            while True:
                kind, payload = await self._queue.get()
                if kind == "audio":
                    if self._stream is None:
                        raise RuntimeError("audio queued for a session without a stream")
                    result = await self._stream.push(payload)
                    self.decoded_s += self.chunk_s
                    if self._caught_up():
                        self._catching_up = False  # from now on any lag counts
                    await self._deliver(result)
                    if self._shed:
                        await self._finish_and_close(1013, "overloaded", busy=True)
                        return
                elif kind == "configure":
                    await self._configure(payload)
                elif kind == "stop":
                    await self._finish_and_close(1000, "stopped", stopped=True)
                    return
                elif kind == "busy":
                    await self._finish_and_close(1013, "overloaded", busy=True)
                    return
                elif kind == "violation":
                    await self._send_error(payload.error_code, str(payload))
                    await self._finish_and_close(payload.code, str(payload))
                    return
                elif kind == "failed":
                    await self._send_error("internal", "the server failed; resume with the resume token")
                    await self._finish_and_close(1011, "internal error")
                    return
                elif kind == "gone":
                    self._log.info("client_gone", code=payload)
                    await self._finish_quietly()
                    return
                elif kind == "finalize":
                    await self._finalize()
                elif kind == "end" and self._end_request is not None:
                    code, reason = self._end_request
                    if code == 1012:
                        self._to(SessionState.DRAINING)
                        await self._send_reconnect(reason)
                    await self._finish_and_close(code, reason, self._end_error)
                    return
        except PersistFailed as exc:
            await self._send_error("storage_unavailable", f"{exc}; resume later with the resume token")
            await self._close(1013, "captions cannot be stored")
        except EngineError as exc:
            self._log.error("engine_failed", error=str(exc))
            self._stream = None
            await self._send_error("decoder_failed", "the decoder failed; reconnect later")
            await self._close(1011, "decoder failed")

    async def _deliver(self, result: StepResult) -> None:
        """Persist then send each new final; send the partial unless the server is lagging."""
        for final in result.finals:
            await self._commit(final)
        if result.level is not None and result.level.state != self.input_level:
            self.input_level = result.level.state
            self.svc.metrics.input_level_warnings.labels(state=result.level.state).inc()
            await self._send_input_level(result.level)
        partial = result.partial
        self._chunks_delivered += 1
        fewer = self.svc.ladder.rung >= Rung.FEWER_PARTIALS and self._chunks_delivered % 2 == 1
        if partial != self.last_partial and not fewer:  # the ladder's third rung: every other chunk
            self.last_partial = partial
            if self.lag_s < self.svc.settings.lag_drop_partials_s:
                self.partials += 1
                self.svc.hub.feed.publish_partial(self, partial)
                await self._send_partial(partial)
            else:
                self.svc.metrics.partials_dropped.inc()

    async def _send_load(self, load: dict[str, Any]) -> None:
        await self._send({"type": "load", **load})

    async def _send_reconnect(self, reason: str) -> None:
        """The replica drains: the client is told to resume elsewhere before the close (1012)."""
        await self._send({"type": "reconnect", "reason": reason})

    async def _send_input_level(self, level: InputLevel) -> None:
        """Tell the speaker their microphone is too quiet or clipping (or fine again); a compatible protocol
        without such a message sends nothing."""
        await self._send(
            {
                "type": "input_level",
                "state": level.state,
                "speech_dbfs": level.speech_dbfs,
                "peak_dbfs": level.peak_dbfs,
                "gain_db": level.gain_db,
                "message": INPUT_LEVEL_MESSAGES[level.state],
            }
        )

    async def _send_partial(self, partial: str) -> None:
        """The protocol's ``partial`` message (a compatible protocol sends its own)."""
        await self._send(
            {
                "type": "partial",
                "text": partial,
                "utterance": self.utterance,
                "audio_s": round(self.audio_offset_s + self.decoded_s, 3),
                "lag_s": round(self.lag_s, 2),
            }
        )

    async def _send_final(self, segment: CaptionSegment, audio_end_s: float, source: str) -> None:
        """The protocol's ``final`` message for a stored caption (a compatible protocol sends its own)."""
        await self._send(final_message(segment) | {"audio_s": round(audio_end_s, 3), "pass": source})

    async def _finalize(self) -> None:
        """Only compatible protocols queue a ``finalize`` (``backend.compat.deepgram_ws``)."""
        raise RuntimeError("finalize is not a captions.v1 message")

    async def _commit(self, final: Any) -> None:
        text, matched = self._vocabulary.current.apply(final.text.strip())
        if not text:
            return
        self.utterance += 1
        self.last_partial = ""
        offset = self.audio_offset_s + self.stream_start_s  # the stream's clock on the session's
        fields = {
            "meeting_id": self.meeting_id,
            "text": text,
            "start_s": round(offset + final.start_s, 3),
            "end_s": round(offset + final.end_s, 3),
            "words": [
                {"text": w.text, "start_s": round(offset + w.start_s, 3), "end_s": round(offset + w.end_s, 3)}
                for w in final.words
            ],
            "matched_terms": matched,
        }
        audio_end_s = self.audio_offset_s + self.decoded_s

        def store_once() -> Awaitable[CaptionSegment]:
            return self._store.store(self.session_id, self.generation, fields, audio_end_s)

        svc = self.svc
        try:
            segment = await with_retries(
                svc.persist,
                svc.metrics.persist_failures,
                store_once,
                svc.settings.persist_attempts,
                probe=lambda: self._store.probe(self.session_id, self.meeting_id),
            )
        except Superseded:
            self._superseded()  # the new connection's client sends this audio again
            return
        self.finals += 1
        self.svc.metrics.finals_persisted.inc()
        self.seq = segment.seq
        await self._send_final(segment, audio_end_s, final.source)
        self.svc.hub.feed.publish_final(self, segment)

    def _superseded(self) -> None:
        """A later resume (on another replica) took the session over: stop streaming into it (its finals
        are not stored; the resumed client sends their audio again)."""
        if self.state == SessionState.STREAMING and self._end_request is None:
            self._log.info("session_superseded")
            self._end_request = (1008, "resumed by another connection")
            self._queue.put_nowait(("end", None))

    async def _configure(self, request: dict[str, Any]) -> None:
        settings = self.svc.settings
        try:
            valid, errors = validate_session_terms(
                request.get("terms"), settings.max_terms_per_session, self.svc.term_limits, self.svc.tokenizer
            )
        except TooManyTerms as exc:
            await self._send_error("invalid_terms", str(exc))
            return
        if errors:
            rejected = [e.as_dict("index") for e in errors]
            await self._send_error("invalid_terms", f"{len(errors)} term(s) rejected", rejected)
            return
        if self.live is None:
            raise RuntimeError("configure before the session streams")
        await self._vocabulary.configure(valid, self.live, self._stream)
        await self._send(
            {
                "type": "configured",
                "version": self._vocabulary.current.version_key(),
                "terms": [{"text": t.text, "display": t.display, "weight": t.weight} for t in valid],
            }
        )

    async def meeting_vocabulary_changed(self) -> None:
        """The meeting's vocabulary was re-applied while live: switch this stream between steps."""
        if self.live is not None:
            await self._vocabulary.rebuild(self.live, self._stream)

    # ----- closing ---------------------------------------------------------------------------------
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
        if stopped:
            await self._send({"type": "stopped", "finals": self.seq})
        if busy:
            self.svc.metrics.rejected_sessions.labels(reason="busy").inc()
            await self._send({"type": "busy", "message": "the server is overloaded; try again shortly"})
        await self._close(code, reason)

    async def _finish_quietly(self) -> None:
        """The client vanished: still commit (persist) its last words so a resume replays them."""
        self.svc.hub.feed.publish_status(self, "reconnecting", self.svc.settings.resume_ttl_s)
        if self._stream is not None:
            result = await self._stream.finish()
            self._stream = None
            for final in result.finals:
                await self._commit(final)
        self._to(SessionState.CLOSED)

    async def _fail(self) -> None:
        """After an unexpected exception in the consumer: tell the client and close 1011 (the stream is
        aborted in ``_cleanup``; the finals already sent are persisted, a resume continues after them)."""
        await self._send_error("internal", "the server failed; resume with the resume token")
        await self._close(1011, "internal error")

    async def _close(self, code: int, reason: str) -> None:
        if self.state != SessionState.CLOSED:
            self._to(SessionState.CLOSED)
        if self.ws.application_state != WebSocketState.DISCONNECTED:
            try:
                await self.ws.close(code=code, reason=reason[:120])
            except (RuntimeError, WebSocketDisconnect):
                pass  # the client closed first; nothing left to tell it
        self._log.info("session_closed", code=code, reason=reason, finals=self.seq)

    async def _cleanup(self) -> None:
        if self._stream is not None:
            self._stream.abort()
            self._stream = None
        self._vocabulary.release()
        if self.live is not None:
            self.svc.hub.leave(self, self.live)
            self.svc.metrics.sessions.dec()
            self.svc.hub.feed.publish_status(self, "stopped")  # ignored after "reconnecting"
        if self.state != SessionState.CLOSED:
            self._to(SessionState.CLOSED)
        try:
            if self.session_id:  # unless a later resume owns the session now
                await self._store.record_end(self.session_id, self.generation)
        except SQLAlchemyError:
            self._log.exception("session_end_not_recorded")
        finally:
            self._done.set()


async def websocket_endpoint(websocket: WebSocket) -> None:
    """``/ws``: the caption stream (protocol v1)."""
    svc: Services = websocket.app.state.services
    admission = await admit(websocket, svc)
    if admission is None:
        return
    session = CaptionSession(websocket, svc, admission)
    structlog.contextvars.bind_contextvars(meeting_id=admission.meeting_id)
    try:
        await session.run()
    finally:
        svc.hub.slots.release(admission.user_id)
        structlog.contextvars.clear_contextvars()
