"""The meeting view's PostgreSQL bus (``backend.meeting_view.bus``) between two replicas' feeds, on a real
PostgreSQL: what replica A publishes reaches a viewer on replica B without polling; a final too large for a
notification arrives by reference; a lost connection on either side loses nothing (docs/protocol.md,
"Several replicas"). Each scenario runs on its own thread's event loop: SQLAlchemy's greenlets on the main
thread upset CPython 3.11's recursion counter, and pytest's later ast.parse then fails."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import update

from backend.db.migrate import upgrade
from backend.db.models import (
    CaptionSegment,
    Meeting,
    MeetingKind,
    MeetingStatus,
    StreamSession,
    User,
    ViewerLink,
    utcnow,
)
from backend.db.session import Database
from backend.meeting_view.bus import MAX_PAYLOAD_BYTES, PayloadTooLarge, PostgresBus, encode
from backend.meeting_view.feed import MeetingFeed
from backend.meeting_view.viewers import Partial, Viewer

pytestmark = pytest.mark.postgres


@dataclass
class Speaker:
    session_id: str
    meeting_id: int
    user_id: int
    utterance: int = 1


@dataclass
class Replicas:
    a: MeetingFeed
    b: MeetingFeed
    db: Database
    viewer: Viewer
    speaker: Speaker
    url: str


def test_an_event_that_does_not_fit_a_notification_is_refused_typed() -> None:
    assert len(encode({"t": "é" * 3000}).encode()) <= MAX_PAYLOAD_BYTES
    with pytest.raises(PayloadTooLarge):
        encode({"t": "é" * 4000})  # 8,000 bytes in UTF-8: PostgreSQL would refuse it


def test_sqlite_keeps_the_in_process_feed() -> None:
    assert MeetingFeed(Database("sqlite+aiosqlite:///:memory:")).bus is None


def in_thread(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """``asyncio.run(scenario())`` on a thread of its own; its exception is raised here."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


@pytest.fixture
def database(postgres: Any) -> str:
    url = postgres.new_database()
    worker = threading.Thread(target=upgrade, args=("head", url))
    worker.start()
    worker.join()
    return url


@contextlib.asynccontextmanager
async def replicas(url: str) -> AsyncIterator[Replicas]:
    """Replicas A (the speaker's) and B (a viewer's) on one database with one live meeting."""
    db = Database(url)
    async with db.session() as s:
        user = User(username="speaker", password_hash="-")
        s.add(user)
        await s.flush()
        meeting = Meeting(
            title="Bus",
            kind=MeetingKind.MEETING,
            status=MeetingStatus.LIVE,
            owner_id=user.id,
            started_at=utcnow(),
        )
        s.add(meeting)
        await s.flush()
        s.add(
            StreamSession(
                id="s1",
                meeting_id=meeting.id,
                user_id=user.id,
                resume_token_hash="-",
                resume_expires_at=utcnow(),
            )
        )
        speaker = Speaker("s1", meeting.id, user.id)
    a, b = MeetingFeed(Database(url)), MeetingFeed(Database(url))
    assert isinstance(a.bus, PostgresBus) and isinstance(b.bus, PostgresBus)
    viewer, _channel = await b.subscribe(speaker.meeting_id)
    try:
        yield Replicas(a, b, db, viewer, speaker, url)
    finally:
        b.unsubscribe(viewer)
        await a.close()
        await b.close()
        await db.dispose()


async def store(r: Replicas, seq: int, text: str) -> CaptionSegment:
    """A final as a caption session persists it (before publishing)."""
    async with r.db.session() as s:
        segment = CaptionSegment(
            meeting_id=r.speaker.meeting_id, session_id="s1", seq=seq, text=text, start_s=seq, end_s=seq + 0.5
        )
        s.add(segment)
        await s.execute(update(StreamSession).where(StreamSession.id == "s1").values(last_seq=seq))
    return segment


async def received(viewer: Viewer, count: int, timeout_s: float = 5.0) -> list[tuple[str, Any]]:
    got: list[tuple[str, Any]] = []
    async with asyncio.timeout(timeout_s):
        while len(got) < count:
            got += await viewer.next()
    return got


def test_partials_and_finals_from_another_replica_reach_the_viewer_without_polling(database: str) -> None:
    in_thread(lambda: arrive_without_polling(database))


async def arrive_without_polling(url: str) -> None:
    async with replicas(url) as r:
        channel = r.b.channels[r.speaker.meeting_id]
        assert channel.poller is not None and channel.poller.done()  # it LISTENed and read once: no loop

        r.a.publish_partial(r.speaker, "good mor")
        r.a.publish_final(r.speaker, await store(r, 1, "Good morning."))
        (k1, partial), (k2, final) = await received(r.viewer, 2)
        assert (k1, partial) == ("partial", Partial("s1", r.speaker.user_id, 1, "good mor"))
        assert (k2, final.seq, final.text, final.start_s) == ("final", 1, "Good morning.", 1.0)

        long_text = "word " * 2000  # 10,000 bytes: sent as a reference, read from SQL
        r.a.publish_final(r.speaker, await store(r, 2, long_text))
        [(kind, segment)] = await received(r.viewer, 1)
        assert (kind, segment.seq, segment.text) == ("final", 2, long_text)
        assert r.b.bus is not None and r.b.bus.received == 3


def test_a_lost_connection_on_either_side_loses_no_final(database: str) -> None:
    in_thread(lambda: lose_connections(database))


async def lose_connections(url: str) -> None:
    async with replicas(url) as r:
        assert r.a.bus is not None and r.b.bus is not None
        r.a.publish_partial(r.speaker, "warm up")  # both connected
        await received(r.viewer, 1)
        admin = await asyncpg.connect(r.url.replace("postgresql+asyncpg", "postgresql"))
        try:
            # The viewer's replica loses its connection (and cannot reconnect for a while): what is published
            # meanwhile comes from SQL once it is back.
            dsn, r.b.bus.dsn = r.b.bus.dsn, "postgresql://captions@127.0.0.1:1/none"
            await admin.execute("SELECT pg_terminate_backend($1)", r.b.bus._pid)
            async with asyncio.timeout(5):
                while r.b.bus._conn is not None:
                    await asyncio.sleep(0.01)
            r.a.publish_final(r.speaker, await store(r, 1, "while away"))
            await asyncio.sleep(0.3)  # delivered to nobody on B
            r.b.bus.dsn = dsn
            got = await received(r.viewer, 1)
            assert [(k, p.seq, p.text) for k, p in got] == [("final", 1, "while away")]
            assert r.b.bus.reconnects == 1
            r.a.publish_final(r.speaker, await store(r, 2, "listening again"))
            assert [p.text for _k, p in await received(r.viewer, 1)] == ["listening again"]

            # The speaker's replica loses its connection: its final is sent once it is back.
            await admin.execute("SELECT pg_terminate_backend($1)", r.a.bus._pid)
            r.a.publish_final(r.speaker, await store(r, 3, "sent again"))
            assert [p.text for _k, p in await received(r.viewer, 1)] == ["sent again"]
        finally:
            await admin.close()
        await asyncio.sleep(0.3)
        assert r.viewer.queued == 0  # nothing twice


def test_a_view_opened_by_a_link_closes_when_the_link_expires_without_polling(database: str) -> None:
    in_thread(lambda: expire_link(database))


async def expire_link(url: str) -> None:
    async with replicas(url) as r:
        async with r.db.session() as s:
            link = ViewerLink(
                meeting_id=r.speaker.meeting_id,
                label="Hall",
                token_hash="0" * 64,
                expires_at=utcnow() + timedelta(seconds=0.5),
            )
            s.add(link)
        viewer, _channel = await r.b.subscribe(r.speaker.meeting_id, link_id=link.id)
        try:
            assert await received(viewer, 1, timeout_s=3) == [("refused", "link_expired")]
            assert r.viewer.queued == 0  # the ticket's viewer stays
        finally:
            r.b.unsubscribe(viewer)
