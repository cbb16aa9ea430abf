"""The meeting view's cross-replica bus on PostgreSQL: ``LISTEN``/``NOTIFY`` on the database every replica
already shares (``backend.meeting_view.feed`` uses it when the database is PostgreSQL).

Each replica holds ONE extra connection to PostgreSQL (asyncpg, outside SQLAlchemy's pool). On it the
replica

- publishes each event of its own streams (partials, finals, speaker statuses, a meeting's end or rename,
  a revoked viewer link) with ``pg_notify('captions_meeting_<id>', payload)``: ``publish`` only appends to a
  bounded queue and returns (a speaker never waits for the bus); a sender task sends what is queued in one
  statement;
- ``LISTEN``s to the channels of the meetings its viewers follow (``listen``/``unlisten``), and hands each
  notification from ANOTHER backend (its own are skipped: the feed delivered them in process already) to
  ``on_event``.

Losses are made up from SQL, never by polling: a batch that failed to send is sent again once the
connection is back (finals twice are harmless, the feed counts each ``(session_id, seq)`` once; stale
partials are dropped), and after a reconnect ``on_resync`` tells the feed that notifications may have been
missed while no ``LISTEN`` was in force, so it reads each followed meeting once. A payload is at most
``MAX_PAYLOAD_BYTES`` (PostgreSQL refuses 8,000 bytes and more); the feed sends a reference instead of a
final that does not fit.

When this stops being enough (docs/deploy.md, "Kubernetes"): every ``NOTIFY`` takes PostgreSQL's one
notification-queue lock at commit, so the bus serialises at a few thousand notifications per second across
all replicas (a partial about every 0.5 s per live stream: roughly 1,000-2,000 live streams), and a
listener that stops reading makes the queue (8 GB) grow. A dedicated bus (NATS subjects
``captions.meeting.<id>``, or Redis pub/sub channels of the same names) then takes its place: implement
``FeedBus`` (``publish``/``listen``/``unlisten``/``close`` with the same callbacks) and return it from
``bus_for``; nothing else in the service changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import make_url

from backend.edge.logs import get_logger

log = get_logger(__name__)

MAX_PAYLOAD_BYTES = 7900
"""The largest payload sent, in UTF-8 bytes (PostgreSQL's limit is 8,000, less than a page)."""
MAX_PENDING = 10_000
"""Events waiting to be sent; beyond it partials are dropped first, then the oldest event."""
STALE_PARTIAL_S = 1.0
"""A partial not sent within this long (the connection was away) is not sent at all: newer text follows."""
RECONNECT_S = (0.2, 5.0)
"""Back-off between reconnects: from the first value, doubling, up to the second."""
CHANNEL_PREFIX = "captions_meeting_"

EventHandler = Callable[[int, dict[str, Any]], None]
ResyncHandler = Callable[[], None]


class PayloadTooLarge(ValueError):
    """An event whose JSON is more than ``MAX_PAYLOAD_BYTES``: the caller sends a reference instead."""


def encode(event: dict[str, Any]) -> str:
    """The compact JSON of ``event``; ``PayloadTooLarge`` if it does not fit a notification."""
    payload = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    size = len(payload.encode())
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(f"event of {size} bytes (at most {MAX_PAYLOAD_BYTES})")
    return payload


def channel_of(meeting_id: int) -> str:
    return f"{CHANNEL_PREFIX}{int(meeting_id)}"


class FeedBus(Protocol):
    """What ``backend.meeting_view.feed`` needs of a cross-replica bus (PostgreSQL here; NATS or Redis
    later)."""

    def publish(self, meeting_id: int, event: dict[str, Any]) -> None:
        """Send ``event`` to the other replicas' viewers of the meeting; never waits."""

    async def listen(self, meeting_id: int) -> None:
        """Receive the meeting's events from now on (returns once in force, or once it could not be)."""

    def unlisten(self, meeting_id: int) -> None:
        """Stop receiving the meeting's events (at once; the ``UNLISTEN`` follows)."""

    async def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued (up to ``timeout_s``), then disconnect."""


@dataclass
class _Pending:
    channel: str
    payload: str
    partial: bool
    queued_at: float


class PostgresBus:
    """``FeedBus`` on PostgreSQL ``LISTEN``/``NOTIFY`` over one asyncpg connection (event loop only)."""

    def __init__(
        self,
        dsn: str,
        on_event: EventHandler,
        on_resync: ResyncHandler,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.dsn = dsn
        self.on_event = on_event
        self.on_resync = on_resync
        self.max_pending = max_pending
        self.listening: set[int] = set()
        self.sent = 0
        self.received = 0
        self.dropped = 0
        self.reconnects = 0
        self._pending: deque[_Pending] = deque()
        self._wake = asyncio.Event()
        self._connected = asyncio.Event()
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        self._conn: Any = None
        self._pid: int | None = None
        self._runner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @classmethod
    def for_url(cls, database_url: str, on_event: EventHandler, on_resync: ResyncHandler) -> PostgresBus:
        """The bus of a SQLAlchemy ``postgresql+asyncpg://`` URL."""
        url = make_url(database_url).set(drivername="postgresql")
        return cls(url.render_as_string(hide_password=False), on_event, on_resync)

    # ----- publishing ---------------------------------------------------------------------------------------
    def publish(self, meeting_id: int, event: dict[str, Any]) -> None:
        if self._closing:
            return
        payload = encode(event)
        if len(self._pending) >= self.max_pending:
            self._drop_one(partial=event.get("k") == "p")
            if event.get("k") == "p":
                return
        self._pending.append(
            _Pending(channel_of(meeting_id), payload, event.get("k") == "p", time.monotonic())
        )
        self._start()
        self._wake.set()

    def _drop_one(self, partial: bool) -> None:
        """Make room: the oldest queued partial goes, else (for a new non-partial) the oldest event."""
        self.dropped += 1
        if partial:
            return
        for index, item in enumerate(self._pending):
            if item.partial:
                del self._pending[index]
                return
        self._pending.popleft()  # receivers see a gap in that stream's numbers and read SQL

    # ----- subscribing --------------------------------------------------------------------------------------
    async def listen(self, meeting_id: int, timeout_s: float = 5.0) -> None:
        self.listening.add(meeting_id)
        self._start()
        try:
            await asyncio.wait_for(self._connected.wait(), timeout_s)
        except TimeoutError:
            log.warning("feed_bus_not_connected", meeting_id=meeting_id)
            return  # LISTEN follows on connect, then a resync
        async with self._lock:
            conn = self._conn
            if conn is not None and meeting_id in self.listening:
                with contextlib.suppress(Exception):  # a lost connection: LISTEN again on reconnect
                    await conn.add_listener(channel_of(meeting_id), self._notified)

    def unlisten(self, meeting_id: int) -> None:
        self.listening.discard(meeting_id)
        task = asyncio.create_task(self._unlisten(meeting_id), name=f"feed-bus-unlisten-{meeting_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _unlisten(self, meeting_id: int) -> None:
        async with self._lock:
            conn = self._conn
            if conn is not None and meeting_id not in self.listening:  # not followed again meanwhile
                with contextlib.suppress(Exception):
                    await conn.remove_listener(channel_of(meeting_id), self._notified)

    def _notified(self, _conn: Any, pid: int, channel: str, payload: str) -> None:
        if pid == self._pid or not channel.startswith(CHANNEL_PREFIX):
            return  # our own: the feed delivered it in process
        self.received += 1
        try:
            meeting_id = int(channel[len(CHANNEL_PREFIX) :])
            event = json.loads(payload)
        except ValueError:
            log.warning("feed_bus_bad_payload", channel=channel)
            return
        if meeting_id in self.listening and isinstance(event, dict):
            self.on_event(meeting_id, event)

    # ----- the connection -----------------------------------------------------------------------------------
    def _start(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run(), name="feed-bus")

    async def _connect(self) -> None:
        import asyncpg  # the postgres extra

        conn = await asyncpg.connect(self.dsn, timeout=5)
        conn.add_termination_listener(lambda _c: self._lost())
        self._pid = conn.get_server_pid()
        for meeting_id in sorted(self.listening):
            await conn.add_listener(channel_of(meeting_id), self._notified)
        self._conn = conn
        self._connected.set()

    def _lost(self) -> None:
        self._connected.clear()
        self._wake.set()

    async def _run(self) -> None:
        backoff = RECONNECT_S[0]
        missed = False  # a connection was lost or never made: notifications may have gone by
        while not (self._closing and not self._pending):
            try:
                if self._conn is None or self._conn.is_closed():
                    missed = missed or self._conn is not None  # lost while idle
                    await self._disconnect()
                    await self._connect()
                    backoff = RECONNECT_S[0]
                    if missed:
                        missed = False
                        self.reconnects += 1
                        log.info("feed_bus_reconnected", listening=len(self.listening))
                        self.on_resync()  # notifications may have been missed meanwhile
                await self._send_pending()
                if not self._pending and not self._closing:
                    self._wake.clear()
                    if self._conn is not None and not self._conn.is_closed():
                        await self._wake.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any driver or network error: reconnect
                log.warning("feed_bus_connection_failed", error=type(exc).__name__, retry_s=backoff)
                missed = True
                await self._disconnect()
                if self._closing:
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RECONNECT_S[1])

    async def _send_pending(self) -> None:
        while self._pending:
            batch = list(self._pending)
            self._pending.clear()
            now = time.monotonic()
            batch = [p for p in batch if not (p.partial and now - p.queued_at > STALE_PARTIAL_S)]
            if not batch:
                return
            try:
                async with self._lock:
                    await self._conn.execute(
                        "SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS t(c, p)",
                        [p.channel for p in batch],
                        [p.payload for p in batch],
                    )
            except Exception:
                self._pending.extendleft(reversed([p for p in batch if not p.partial]))
                raise
            self.sent += len(batch)

    async def _disconnect(self) -> None:
        conn, self._conn, self._pid = self._conn, None, None
        self._connected.clear()
        if conn is None:
            return
        try:
            if not conn.is_closed():
                await asyncio.wait_for(conn.close(), 2)
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass
        finally:
            conn.terminate()  # a connection the server closed still holds its transport

    async def close(self, timeout_s: float = 2.0) -> None:
        self._closing = True
        self._wake.set()
        runner = self._runner
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), timeout_s)
            except (TimeoutError, Exception):  # noqa: BLE001 - shutting down: what is left is lost
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._disconnect()
        if self._pending:
            log.warning("feed_bus_closed_with_pending", events=len(self._pending))
