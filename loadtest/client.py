"""One simulated browser: streams a looped WAV in real time over protocol v1 and records what it sees.

Chunk ``k`` (from 0) of a client's audio is complete, and sent, at ``t0 + (k + 1) * chunk_s`` on the
monotonic clock (``t0``: the first ``ready``), so sending never drifts. A server message that carries
``audio_s`` answers the chunk that ends at ``audio_s``; its latency is its receive time minus that chunk's
send time. Latency is measured on a session's first connection only: after a resume the server's ``audio_s``
continues from an offset the client cannot see exactly (resumed connections are still checked for lost and
duplicated finals).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Origin, Subprotocol

from loadtest.audio import AudioLoop

SUBPROTOCOL = "captions.v1"
READY_TIMEOUT_S = 60.0
RESUME_RETRY_S = 1.0  # back-off after a 503 on a resume handshake
RESUME_ATTEMPTS = 5
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
    max_lag_s: float = 0.0
    max_ack_lag_s: float = 0.0
    finals: list[tuple[str, int]] = field(default_factory=list)
    replayed_finals: int = 0
    partials: int = 0
    chunks_sent: int = 0
    dropped: int = 0
    resume_refusals: int = 0
    stopped: bool = False

    @property
    def last_seq(self) -> int:
        return max((seq for _, seq in self.finals), default=0)


@dataclass
class _Connection:
    ws: ClientConnection
    measure: bool
    aborted: bool = False  # the client cut it on purpose (a simulated network drop)
    send_times: dict[int, float] = field(default_factory=dict)  # chunk number in this connection (1..) -> t


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

    async def run(self) -> ClientResult:
        await asyncio.sleep(max(0.0, self.plan.start_at - time.monotonic()))
        try:
            outcome = await self._connection()
            while outcome in ("dropped", "resume_refused"):
                await asyncio.sleep(self.reconnect_delay_s if outcome == "dropped" else RESUME_RETRY_S)
                outcome = await self._connection()
        except Exception as exc:  # a client bug or a REST failure: recorded in the report, never hidden
            self.result.errors.append(f"client:{type(exc).__name__}:{exc}"[:200])
        return self.result

    async def _connection(self) -> str:
        """One WebSocket connection: ticket, handshake, start, stream; says how it ended."""
        ticket = await self.tickets(self.plan.meeting_id)
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
            resuming = self._resume_token is not None and time.monotonic() < self.plan.stop_at
            if exc.response.status_code == 503 and resuming and self.result.resume_refusals < RESUME_ATTEMPTS:
                self.result.resume_refusals += 1  # like a browser: back off and resume again
                return "resume_refused"
            self.result.handshake_status = exc.response.status_code
            self.result.handshake_refused_at = time.monotonic()
            return "refused"
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            self.result.errors.append(f"connect:{type(exc).__name__}")
            return "failed"
        self.result.connections += 1
        try:
            if not await self._start(ws):
                return "failed"
            conn = _Connection(ws, measure=self.result.connections == 1)
            receiver = asyncio.create_task(self._receive(conn))
            return await self._stream(conn, receiver)
        finally:
            await ws.close()

    async def _start(self, ws: ClientConnection) -> bool:
        start: dict[str, Any] = {"type": "start", "chunk_s": self.plan.chunk_s}
        if self._resume_token is not None:
            start |= {"resume_token": self._resume_token, "last_seq": self.result.last_seq}
        try:
            await ws.send(json.dumps(start))
            ready = json.loads(await asyncio.wait_for(ws.recv(), READY_TIMEOUT_S))
        except (ConnectionClosed, TimeoutError):
            self._record_close(ws)
            self.result.errors.append("no_ready")
            return False
        if ready.get("type") != "ready":
            self.result.errors.append(f"expected_ready:{ready.get('type')}:{ready.get('code', '')}")
            return False
        self.result.session_id = ready["session_id"]
        self._resume_token = ready["resume_token"]
        return True

    async def _stream(self, conn: _Connection, receiver: asyncio.Task[None]) -> str:
        """Send chunks on the real-time schedule until stop time, a planned drop, or the server closing."""
        plan, chunk_s = self.plan, self.plan.chunk_s
        if self._audio_t0 is None:  # the microphone starts once the first `ready` arrived
            self._audio_t0 = time.monotonic()
        k = max(0, int((time.monotonic() - self._audio_t0) / chunk_s))  # audio "spoken" while offline is lost
        while True:
            due = self._audio_t0 + (k + 1) * chunk_s
            if due > plan.stop_at:
                return await self._stop(conn, receiver)
            if plan.drop_at is not None and due > plan.drop_at and not self.result.dropped:
                return await self._drop(conn, receiver)
            await asyncio.wait({receiver}, timeout=max(0.0, due - time.monotonic()))
            if receiver.done():
                return "closed"
            try:
                await conn.ws.send(self.audio.chunk(plan.first_chunk + k))
            except ConnectionClosed:
                await receiver
                return "closed"
            conn.send_times[len(conn.send_times) + 1] = time.monotonic()
            self.result.chunks_sent += 1
            k += 1

    async def _stop(self, conn: _Connection, receiver: asyncio.Task[None]) -> str:
        try:
            await conn.ws.send(json.dumps({"type": "stop"}))
        except ConnectionClosed:
            pass
        done, _ = await asyncio.wait({receiver}, timeout=self.stop_timeout_s)
        if not done:
            self.result.errors.append("stop_timeout")
            receiver.cancel()
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
        elif kind == "final":
            result.finals.append((result.session_id, int(message["seq"])))
            if "audio_s" in message:
                self._measure(message, now, conn, result.final_latency_ms)
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

    def _measure(self, message: dict[str, Any], now: float, conn: _Connection, into: list[float]) -> None:
        if not conn.measure or "audio_s" not in message:
            return
        audio_s = float(message["audio_s"])
        sent_at = conn.send_times.get(round(audio_s / self.plan.chunk_s))
        if sent_at is None:
            self.result.errors.append("unmatched_audio_s")
            return
        into.append((now - sent_at) * 1000.0)
        ack_lag_s = len(conn.send_times) * self.plan.chunk_s - audio_s
        self.result.max_ack_lag_s = max(self.result.max_ack_lag_s, ack_lag_s)
