"""A caption session's reader task: receives frames, enforces frame size, audio rate, the queued-audio bound,
the session's length and the idle timeout, and queues the work for the consumer (``backend.sessions.ws``)."""

from __future__ import annotations

import asyncio
import time

from starlette.websockets import WebSocketDisconnect

from backend.edge.websocket import ProtocolViolation, parse_json
from backend.sessions.core import SessionCore


class SessionReader(SessionCore):
    """The reader half of a caption session."""

    async def _reader(self) -> None:
        """Receive frames; enforce frame size, audio rate, buffer bound and idle timeout; queue work."""
        settings = self.svc.settings
        try:
            while True:
                try:
                    message = await asyncio.wait_for(self.ws.receive(), timeout=settings.idle_timeout_s)
                except TimeoutError:
                    self._queue.put_nowait(("violation", ProtocolViolation(1008, "idle timeout")))
                    return
                if message["type"] == "websocket.disconnect":
                    self._queue.put_nowait(("gone", message.get("code")))
                    return
                if time.monotonic() - self.started_monotonic > settings.max_session_s:
                    raise ProtocolViolation(1008, "maximum session length")
                data = message.get("bytes")
                if data is not None:
                    if len(data) > settings.max_ws_message_bytes:
                        raise ProtocolViolation(1009, "frame too large")
                    if len(data) != self.chunk_bytes:
                        raise ProtocolViolation(
                            1008, f"audio frames must be exactly {self.chunk_bytes} bytes"
                        )
                    if not self._queue_chunk(data):
                        await self._discard_until_closed()
                        return
                    continue
                text = message.get("text")
                if text is None:
                    continue
                request = parse_json(text, settings.max_json_depth)
                kind = request.get("type")
                if kind == "keepalive":
                    continue
                if kind in ("stop", "configure"):
                    self._queue.put_nowait((kind, request))
                    if kind == "stop":
                        return
                    continue
                raise ProtocolViolation(1008, f"unknown message type {kind!r}")
        except ProtocolViolation as exc:
            self._queue.put_nowait(("violation", exc))
            await self._discard_until_closed()
        except WebSocketDisconnect as exc:
            self._queue.put_nowait(("gone", exc.code))
        except Exception as exc:  # the consumer must hear of it, or the session would never end
            self._log.exception("reader_failed", error=type(exc).__name__)
            self._queue.put_nowait(("failed", exc))

    def _queue_chunk(self, data: bytes) -> bool:
        """Queue one chunk of audio for the consumer, within the audio rate (``ProtocolViolation`` beyond) and
        the queued-audio bound (False: the session is told busy and must stop reading audio)."""
        settings = self.svc.settings
        now = time.monotonic()
        self._first_audio = now if self._first_audio is None else self._first_audio
        allowed_s = settings.audio_burst_s + self.resend_s  # ahead of real time
        budget_s = (now - self._first_audio) * settings.max_audio_rate + allowed_s
        if self.received_s + self.chunk_s > budget_s:
            raise ProtocolViolation(1008, "audio arrives faster than real time")
        # memory's bound on a session's queued audio; the ladder sheds the newest session well before
        max_queued = max(2, int((2 * settings.lag_busy_s + self.resend_s) / self.chunk_s) + 2)
        if self._queue.qsize() >= max_queued:
            self._queue.put_nowait(("busy", None))
            return False
        self.received_s += self.chunk_s
        self._queue.put_nowait(("audio", data))
        return True

    async def _discard_until_closed(self) -> None:
        """After a violation, drop whatever the client still sends until the socket closes."""
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
