"""One simulated browser: streams a looped WAV in real time over protocol v1 and records what it sees.

The audio of a session is a clock of samples from the first ``ready`` (``t0``): the chunk ending at sample
``e`` is complete, and sent, at ``t0 + e / 16000`` on the monotonic clock, so sending never drifts. Like the
page it keeps the last ``RESEND_S`` seconds: on a resume it tells the server what it holds and sends again
from ``ready``'s ``resume_from_s`` (the end of the stored finals), the held backlog at once. A server message
that carries ``audio_s`` answers the chunk that ends there; its latency is its receive time minus that
chunk's send time (measured on a session's first connection only; resumed ones send a backlog late on
purpose, and are checked for lost and duplicated finals).

With ``resume_on_loss`` (the load test's fault mode) a connection the server lost (a crash, a restart) is
resumed like the page does, retrying until the server is back or ``fault_grace_s`` after the stop time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Origin, Subprotocol

from loadtest.audio import SAMPLE_RATE_HZ, AudioLoop

SUBPROTOCOL = "captions.v1"
READY_TIMEOUT_S = 60.0
RESUME_RETRY_S = 1.0  # back-off after a 503 on a resume handshake
RESEND_S = 30.0  # audio kept for sending again after a resume, as the page does
SENTENCE_SLACK_S = 0.3  # a final holds a sentence's end when its last word ends at most this much before
FINAL_CLOSE = (1000, 1008, 1009)  # close codes after which the page does not reconnect
TicketSource = Callable[[int], Awaitable[str]]


@dataclass(frozen=True)
class ClientPlan:
    """What one client does: when (monotonic seconds) it connects, drops (None: never) and stops."""

    index: int
    meeting_id: int
    chunk_s: float
    start_at: float
    stop_at: float
    first_chunk: int = 0
    drop_at: float | None = None
    resume_on_loss: bool = False
    fault_grace_s: float = 0.0


@dataclass
class ClientResult:
    """Everything one client observed. Times are monotonic seconds."""

    index: int
    meeting_id: int
    session_id: str = ""
    connections: int = 0
    handshake_status: int | None = None
    handshake_refused_at: float | None = None
    busy_at: float | None = None
    close_codes: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    partial_latency_ms: list[float] = field(default_factory=list)
    final_latency_ms: list[float] = field(default_factory=list)
    sentence_final_ms: list[float] = field(default_factory=list)  # a sentence's end -> the final holding it
    longest_final_s: float = 0.0
    max_lag_s: float = 0.0
    max_ack_lag_s: float = 0.0
    finals: list[tuple[str, int]] = field(default_factory=list)
    replayed_finals: int = 0
    partials: int = 0
    chunks_sent: int = 0
    dropped: int = 0
    resume_refusals: int = 0
    outages: int = 0  # connections the server lost (resumed in fault mode)
    reconnect_attempts: int = 0  # fault mode: tries that found the server down
    not_captioned_s: float = 0.0  # audio the server said it could not caption after a resume
    stopped: bool = False
    # First connection only: each live final as (start s, end s, text, the partial shown before it: the last
    # non-empty partial received since the previous final), and the sentences said whole in the audio it
    # sent (AudioLoop.sentences_within; empty when the WAV has no transcript): what WER is scored on.
    captions: list[tuple[float, float, str, str]] = field(default_factory=list)
    reference: list[tuple[float, float, str]] = field(default_factory=list)
    measured_whole: bool = False  # the first connection ran to a stop (no drop, no loss): captions complete

    @property
    def last_seq(self) -> int:
        return max((seq for _, seq in self.finals), default=0)


@dataclass
class _Connection:
    ws: ClientConnection
    measure: bool
    aborted: bool = False  # the client cut it on purpose (a simulated network drop)
    send_times: dict[int, float] = field(default_factory=dict)  # a sent chunk's end (session sample) -> t
    sent_samples: int = 0


class StreamingClient:
    """Runs one ``ClientPlan``; ``run()`` returns its ``ClientResult`` (server behaviour never raises)."""

    def __init__(
        self,
        plan: ClientPlan,
        audio: AudioLoop,
        tickets: TicketSource,
        ws_url: str,
        origin: str,
        reconnect_delay_s: float = 0.5,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.plan = plan
        self.audio = audio
        self.tickets = tickets
        self.ws_url = ws_url
        self.origin = origin
        self.reconnect_delay_s = reconnect_delay_s
        self.stop_timeout_s = stop_timeout_s
        self.result = ClientResult(plan.index, plan.meeting_id)
        self._resume_token: str | None = None
        self._audio_t0: float | None = None  # monotonic time the audio clock started
        self._sentences_held_s = -1.0  # the last sentence end (stream seconds) a final was seen to hold
        self._shown_partial = ""  # the last non-empty partial since the last final (first connection)

    async def run(self) -> ClientResult:
        await asyncio.sleep(max(0.0, self.plan.start_at - time.monotonic()))
        try:
            outcome = await self._connection()
            while outcome in ("dropped", "resume_refused") or self._resumes_after(outcome):
                await asyncio.sleep(self.reconnect_delay_s if outcome != "resume_refused" else RESUME_RETRY_S)
                outcome = await self._connection()
        except Exception as exc:  # a client bug or a REST failure: recorded in the report, never hidden
            self.result.errors.append(f"client:{type(exc).__name__}:{exc}"[:200])
        return self.result

    def _resumes_after(self, outcome: str) -> bool:
        """Fault mode: the server lost the connection (or was down): resume, until the grace time ends."""
        plan = self.plan
        if not plan.resume_on_loss or self._resume_token is None or outcome not in ("closed", "failed"):
            return False
        codes = self.result.close_codes
        if outcome == "closed" and (not codes or codes[-1] in FINAL_CLOSE):
            return False
        return time.monotonic() < plan.stop_at + plan.fault_grace_s

    def _held(self) -> tuple[int, int]:
        """The audio captured so far and the oldest still held, in samples on the session's clock."""
        if self._audio_t0 is None:
            return 0, 0
        chunk = self.audio.chunk_samples
        now = min(time.monotonic(), self.plan.stop_at)
        captured = int((now - self._audio_t0) * SAMPLE_RATE_HZ) // chunk * chunk
        return captured, max(0, captured - int(RESEND_S * SAMPLE_RATE_HZ))

    async def _connection(self) -> str:
        """One WebSocket connection: ticket, handshake, start, stream; says how it ended."""
        try:
            ticket = await self.tickets(self.plan.meeting_id)
        except (httpx.TransportError, httpx.HTTPStatusError):
            if not self.plan.resume_on_loss or self._resume_token is None:
                raise
            self.result.reconnect_attempts += 1  # the server is down: expected in fault mode, retried
            return "failed"
        try:
            ws = await connect(
                self.ws_url,
                subprotocols=[Subprotocol(SUBPROTOCOL), Subprotocol(f"ticket.{ticket}")],
                origin=Origin(self.origin),
                compression=None,
                max_size=2**20,
                ping_interval=None,
                open_timeout=READY_TIMEOUT_S,
            )
        except InvalidStatus as exc:
            # A resume refused with 503 (overloaded, starting) is retried every second as the page does, until
            # ``stop_timeout_s`` after the step (the server's backlog has drained by then) or, in fault mode,
            # until the server had ``fault_grace_s`` to come back: the session's stored finals are replayed.
            plan = self.plan
            grace_s = plan.fault_grace_s if plan.resume_on_loss else self.stop_timeout_s
            resuming = self._resume_token is not None and time.monotonic() < plan.stop_at + grace_s
            if exc.response.status_code == 503 and resuming:
                self.result.resume_refusals += 1  # like a browser: back off and resume again
                return "resume_refused"
            self.result.handshake_status = exc.response.status_code
            self.result.handshake_refused_at = time.monotonic()
            return "refused"
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            if self.plan.resume_on_loss and self._resume_token is not None:
                self.result.reconnect_attempts += 1  # the server is down: expected in fault mode
            else:
                self.result.errors.append(f"connect:{type(exc).__name__}")
            return "failed"
        self.result.connections += 1
        try:
            resume_from = await self._start(ws)
            if resume_from is None:
                return "failed"
            conn = _Connection(ws, measure=self.result.connections == 1)
            receiver = asyncio.create_task(self._receive(conn))
            return await self._stream(conn, receiver, resume_from)
        finally:
            await ws.close()

    async def _start(self, ws: ClientConnection) -> int | None:
        """``start`` / ``ready``; returns the sample to send from (None: no ``ready``)."""
        captured, oldest = self._held()
        start: dict[str, Any] = {"type": "start", "chunk_s": self.plan.chunk_s}
        if self._resume_token is not None:
            start |= {"resume_token": self._resume_token, "last_seq": self.result.last_seq}
        start |= {"audio_s": captured / SAMPLE_RATE_HZ, "buffered_from_s": oldest / SAMPLE_RATE_HZ}
        try:
            await ws.send(json.dumps(start))
            ready = json.loads(await asyncio.wait_for(ws.recv(), READY_TIMEOUT_S))
        except (ConnectionClosed, TimeoutError):
            self._record_close(ws)
            self.result.errors.append("no_ready")
            return None
        if ready.get("type") != "ready":
            self.result.errors.append(f"expected_ready:{ready.get('type')}:{ready.get('code', '')}")
            return None
        self.result.session_id = ready["session_id"]
        self._resume_token = ready["resume_token"]
        gap = ready.get("not_captioned")
        if gap:
            self.result.not_captioned_s += float(gap["to_s"]) - float(gap["from_s"])
        return round(float(ready.get("resume_from_s", captured / SAMPLE_RATE_HZ)) * SAMPLE_RATE_HZ)

    async def _stream(self, conn: _Connection, receiver: asyncio.Task[None], position: int) -> str:
        """Send chunks from sample ``position`` on the real-time schedule (what is already due at once)
        until stop time, a planned drop, or the server closing."""
        plan, chunk = self.plan, self.audio.chunk_samples
        if self._audio_t0 is None:  # the microphone starts once the first `ready` arrived
            self._audio_t0 = time.monotonic()
        first_sample = plan.first_chunk * chunk
        while True:
            due = self._audio_t0 + (position + chunk) / SAMPLE_RATE_HZ
            if due > plan.stop_at:
                return await self._stop(conn, receiver)
            if plan.drop_at is not None and due > plan.drop_at and not self.result.dropped:
                return await self._drop(conn, receiver)
            await asyncio.wait({receiver}, timeout=max(0.0, due - time.monotonic()))
            if receiver.done():
                return "closed"
            try:
                await conn.ws.send(self.audio.samples(first_sample + position))
            except ConnectionClosed:
                await receiver
                return "closed"
            position += chunk
            conn.send_times[position] = time.monotonic()
            conn.sent_samples += chunk
            self.result.chunks_sent += 1

    async def _stop(self, conn: _Connection, receiver: asyncio.Task[None]) -> str:
        try:
            await conn.ws.send(json.dumps({"type": "stop"}))
        except ConnectionClosed:
            pass
        done, _ = await asyncio.wait({receiver}, timeout=self.stop_timeout_s)
        if not done:
            self.result.errors.append("stop_timeout")
            receiver.cancel()
        if conn.measure:
            first = self.plan.first_chunk * self.audio.chunk_samples
            self.result.reference = self.audio.sentences_within(first, conn.sent_samples / SAMPLE_RATE_HZ)
            self.result.measured_whole = bool(done) and self.result.stopped and not self.result.outages
        return "stopped"

    async def _drop(self, conn: _Connection, receiver: asyncio.Task[None]) -> str:
        """A network drop: the TCP connection vanishes without a close frame (the browser will resume)."""
        self.result.dropped += 1
        conn.aborted = True
        conn.ws.transport.abort()
        done, _ = await asyncio.wait({receiver}, timeout=5.0)
        if not done:
            receiver.cancel()
        return "dropped"

    async def _receive(self, conn: _Connection) -> None:
        try:
            async for raw in conn.ws:
                if isinstance(raw, bytes):
                    self.result.errors.append("binary_from_server")
                    continue
                self._on_message(json.loads(raw), time.monotonic(), conn)
        except ConnectionClosed:
            pass  # the close code is read from the connection below
        if not conn.aborted:
            self._record_close(conn.ws)
            if self.result.close_codes[-1] not in FINAL_CLOSE:
                self.result.outages += 1

    def _record_close(self, ws: ClientConnection) -> None:
        code = ws.close_code
        self.result.close_codes.append(code if code is not None else 1006)

    def _on_message(self, message: dict[str, Any], now: float, conn: _Connection) -> None:
        kind = message.get("type")
        result = self.result
        if kind == "partial":
            result.partials += 1
            result.max_lag_s = max(result.max_lag_s, float(message.get("lag_s", 0.0)))
            self._measure(message, now, conn, result.partial_latency_ms)
            if str(message.get("text", "")).strip():
                self._shown_partial = str(message["text"])
        elif kind == "final":
            result.finals.append((result.session_id, int(message["seq"])))
            if "audio_s" in message:
                self._measure(message, now, conn, result.final_latency_ms)
                self._measure_sentences(message, now, conn)
                if conn.measure:
                    span = float(message.get("start_s", 0.0)), float(message.get("end_s", 0.0))
                    result.captions.append((*span, str(message.get("text", "")), self._shown_partial))
                self._shown_partial = ""
            else:
                result.replayed_finals += 1
        elif kind == "busy":
            result.busy_at = now
        elif kind == "stopped":
            result.stopped = True
        elif kind == "error":
            result.errors.append(f"server:{message.get('code')}")
        elif kind == "reconnect":
            result.errors.append("server:reconnect")

    def _measure_sentences(self, message: dict[str, Any], now: float, conn: _Connection) -> None:
        """Latency from the end of each sentence (where the audio's speech stops, ``speech_ends``) to the
        final that holds its last word; each sentence counted once, on a session's first connection."""
        start_s, end_s = float(message.get("start_s", 0.0)), float(message.get("end_s", 0.0))
        self.result.longest_final_s = max(self.result.longest_final_s, end_s - start_s)
        if not conn.measure or self._audio_t0 is None:
            return
        first = self.plan.first_chunk * self.audio.chunk_samples
        until = end_s + SENTENCE_SLACK_S
        for sentence_end in self.audio.sentence_ends_s(first, self._sentences_held_s, until):
            self.result.sentence_final_ms.append((now - (self._audio_t0 + sentence_end)) * 1000.0)
            self._sentences_held_s = sentence_end

    def _measure(self, message: dict[str, Any], now: float, conn: _Connection, into: list[float]) -> None:
        if not conn.measure or "audio_s" not in message:
            return
        audio_s = float(message["audio_s"])
        sent_at = conn.send_times.get(round(audio_s * SAMPLE_RATE_HZ))
        if sent_at is None:
            self.result.errors.append("unmatched_audio_s")
            return
        into.append((now - sent_at) * 1000.0)
        ack_lag_s = conn.sent_samples / SAMPLE_RATE_HZ - audio_s
        self.result.max_ack_lag_s = max(self.result.max_ack_lag_s, ack_lag_s)
