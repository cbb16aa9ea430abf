"""Defects an outside probe found in the WebSocket layer (issue 29), against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import InvalidStatus

import backend.sessions.reader
from backend.config import Settings
from backend.db.models import Meeting, Role, StreamSession, User, utcnow
from backend.db.session import Database
from backend.engine.types import StreamOptions
from backend.sessions import resume
from tests.sessions.test_protocol import (
    collect,
    finals,
    meeting,
    open_ws,
    persisted,
    speak_and_drop,
    speak_until_final,
    start,
    ticket,
)
from tests.support.fake_engine import FakeEngine, FakeStream, chunk
from tests.support.server import LiveServer, make_settings

pytestmark = pytest.mark.slow

CRASH_SAMPLE = 99


class CrashingStream(FakeStream):
    """Raises a plain bug (not an EngineError) on a chunk whose first sample is CRASH_SAMPLE."""

    async def push(self, pcm: bytes) -> object:
        if pcm[:2] == CRASH_SAMPLE.to_bytes(2, "little"):
            raise ZeroDivisionError("a bug in a per-session task")
        return await super().push(pcm)


class CrashingEngine(FakeEngine):
    def open_stream(self, options: StreamOptions) -> FakeStream:
        stream = CrashingStream(self, options)
        self.open_streams.add(id(stream))
        return stream


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, idle_timeout_s=3.0, max_sessions=8, max_sessions_per_user=4)
    with LiveServer(settings, CrashingEngine()) as live:
        yield live


def live_sessions(api: httpx.Client) -> list[dict[str, object]]:
    return api.get("/api/live").json()["sessions"]


async def wait_until_no_live_session(api: httpx.Client) -> list[dict[str, object]]:
    for _ in range(50):
        sessions = live_sessions(api)
        if not sessions:
            break
        await asyncio.sleep(0.1)
    return sessions


async def test_deeply_nested_frame_ends_the_session_cleanly_and_frees_the_slot(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    for _ in range(5):  # more than the per-user cap: each one must release its slot
        ws = await open_ws(server, ticket(api, meeting_id))
        await start(ws)
        await ws.send(chunk(11))
        await ws.send("[" * 30_000 + "]" * 30_000)
        messages = await asyncio.wait_for(collect(ws), 10)
        errors = [m for m in messages if m["type"] == "error"]
        assert errors and errors[0]["code"] == "protocol" and "nested" in errors[0]["message"]
        assert ws.close_code == 1008
        assert [m["text"] for m in finals(messages)] == ["word11"]  # finals flushed
        assert await wait_until_no_live_session(api) == []


async def test_a_bug_in_the_consumer_ends_the_session_with_an_error_and_1011(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    await ws.send(chunk(12))
    await ws.send(chunk(0))
    await ws.send(chunk(CRASH_SAMPLE))
    messages = await asyncio.wait_for(collect(ws), 10)
    assert [m["text"] for m in finals(messages)] == ["word12"]
    assert messages[-1]["type"] == "error" and messages[-1]["code"] == "internal"
    assert ws.close_code == 1011
    assert await wait_until_no_live_session(api) == []
    assert server.services.engine.open_streams == set()


async def test_a_bug_in_the_reader_ends_the_session_and_flushes_finals(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)

    def broken_parser(raw: str) -> dict[str, object]:
        raise KeyError("a bug in the reader")

    monkeypatch.setattr(backend.sessions.reader, "parse_json", broken_parser)
    await ws.send(chunk(13))
    await ws.send(json.dumps({"type": "keepalive"}))
    messages = await asyncio.wait_for(collect(ws), 10)
    assert [m["code"] for m in messages if m["type"] == "error"] == ["internal"]
    assert [m["text"] for m in finals(messages)] == ["word13"]
    assert ws.close_code == 1011
    assert persisted(server) == [(1, "word13")]
    assert await wait_until_no_live_session(api) == []


async def test_binary_frame_before_start_gets_an_error_message(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws: ClientConnection = await open_ws(server, ticket(api, meeting_id))
    await ws.send(chunk(1))
    messages = await asyncio.wait_for(collect(ws), 10)
    assert messages == [
        {"type": "error", "code": "protocol", "message": "expected a start message, got a binary frame"}
    ]
    assert ws.close_code == 1008


async def test_per_user_cap_holds_when_sessions_start_concurrently(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    cap = server.settings.max_sessions_per_user
    sockets: list[ClientConnection] = []
    refused = 0
    for _ in range(cap + 3):
        try:
            sockets.append(await open_ws(server, ticket(api, meeting_id)))
        except InvalidStatus as exc:
            assert exc.response.status_code == 503
            refused += 1
    results = await asyncio.gather(
        *(ws.send(json.dumps({"type": "start", "chunk_s": 0.56})) for ws in sockets)
    )
    assert len(results) == cap and refused == 3
    ready = [json.loads(await ws.recv())["type"] for ws in sockets]
    assert ready == ["ready"] * cap
    assert len(live_sessions(api)) == cap
    for ws in sockets:
        await ws.close()
    assert await wait_until_no_live_session(api) == []
    again = await open_ws(server, ticket(api, meeting_id))  # every slot was released
    await start(again)
    await again.close()


async def test_two_simultaneous_resumes_exactly_one_wins(tmp_path: Path) -> None:
    """Two new connections send ``start`` with the same token while the dropped one still flushes: one
    gets ``ready``, the other a typed ``resume_conflict``; nothing is stored twice; /api/live keeps it."""
    with LiveServer(make_settings(tmp_path), FakeEngine(step_delay_s=0.45)) as live:
        api, meeting_id = meeting(live)
        ready = await speak_and_drop(live, api, meeting_id)
        sockets = [await open_ws(live, ticket(api, meeting_id)) for _ in range(2)]
        resume = json.dumps(
            {"type": "start", "chunk_s": 0.56, "resume_token": ready["resume_token"], "last_seq": 0}
        )
        await asyncio.gather(*(ws.send(resume) for ws in sockets))
        first = await asyncio.gather(*(ws.recv() for ws in sockets))
        kinds = sorted((json.loads(m)["type"], json.loads(m).get("code")) for m in first)
        assert kinds == [("error", "resume_conflict"), ("ready", None)]
        winner, loser = sockets if json.loads(first[0])["type"] == "ready" else sockets[::-1]
        await asyncio.wait_for(collect(loser), 10)
        assert loser.close_code == 1013  # try again later: a page retries, a second tab would take over
        assert [s["session_id"] for s in live_sessions(api)] == [ready["session_id"]]
        await winner.send(chunk(64))
        await winner.send(json.dumps({"type": "stop"}))
        got = [(m["seq"], m["text"]) for m in finals(await asyncio.wait_for(collect(winner), 30))]
        assert got == [(1, "word61"), (2, "word62"), (3, "word63"), (4, "word64")]
        assert persisted(live) == got


async def test_a_resume_on_another_replica_supersedes_the_live_connection(
    tmp_path: Path, database_url: str
) -> None:
    """Across replicas the database decides: the connection that was resumed elsewhere ends (1008) at its
    next caption instead of streaming on beside the new one, and that caption is not stored (the audio
    belongs to the session's new owner, whose client sends it again from ``resume_from_s``)."""
    shared = {"database_url": database_url}
    with (
        LiveServer(make_settings(tmp_path, **shared), FakeEngine()) as replica_a,
        LiveServer(make_settings(tmp_path, **shared), FakeEngine(), migrate=False) as replica_b,
    ):
        api, meeting_id = meeting(replica_a)
        old = await open_ws(replica_a, ticket(api, meeting_id))
        ready = await start(old)
        await speak_until_final(old, (71, 0))
        new = await open_ws(replica_b, ticket(api, meeting_id))
        resumed = await start(new, resume_token=ready["resume_token"], last_seq=1)
        assert resumed["resume_from_s"] == 1.12
        for sample in (72, 0):
            await old.send(chunk(sample))
        rest = await asyncio.wait_for(collect(old), 10)
        assert finals(rest) == []
        assert old.close_code == 1008 and "resumed" in (old.close_reason or "")
        for sample in (72, 0):
            await new.send(chunk(sample))
        await new.send(json.dumps({"type": "stop"}))
        messages = await asyncio.wait_for(collect(new), 10)
        assert [(m["seq"], m["text"], m["start_s"]) for m in finals(messages)] == [(2, "word72", 1.12)]
        assert persisted(replica_a) == [(1, "word71"), (2, "word72")]


async def test_the_database_lets_exactly_one_claim_win(settings: Settings) -> None:
    """Two replicas claiming the same session from the same generation: one UPDATE wins, on SQLite and
    PostgreSQL alike."""
    db = Database(settings.database_url)
    try:
        api_user = User(username="u", password_hash="x", role=Role.MEMBER)
        async with db.session() as session:
            session.add(api_user)
            await session.flush()
            session.add(m := Meeting(title="t", owner_id=api_user.id))
            await session.flush()
            expires = utcnow() + timedelta(minutes=5)
            session.add(
                StreamSession(
                    id="s1",
                    meeting_id=m.id,
                    user_id=api_user.id,
                    resume_token_hash="h",
                    resume_expires_at=expires,
                )
            )
        outcomes = await asyncio.gather(
            *(resume.claim(db, "s1", 0, expires) for _ in range(3)), return_exceptions=True
        )
        assert sorted(map(repr, outcomes)) == sorted(
            [repr(1)] + [repr(resume.ResumeConflict("another connection resumed this session"))] * 2
        )
    finally:
        await db.dispose()


async def test_configure_rejects_a_bad_display_form(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    terms = [{"text": "vancomycin", "display": "evil\u202etxt"}, {"text": "two\nlines"}]
    await ws.send(json.dumps({"type": "configure", "terms": terms}))
    error = json.loads(await ws.recv())
    assert error["code"] == "invalid_terms"
    assert [e["index"] for e in error["errors"]] == [0, 1]
    await ws.close()


def _fail_caption_writes(server: LiveServer, failing: bool) -> None:
    """Make every INSERT into caption_segments fail, as a full disk would (SQLite trigger)."""
    import sqlite3

    path = server.settings.database_url.split("///", 1)[1]
    with sqlite3.connect(path) as connection:
        if failing:
            connection.execute(
                "CREATE TRIGGER disk_full BEFORE INSERT ON caption_segments "
                "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
            )
        else:
            connection.execute("DROP TRIGGER disk_full")
    connection.close()


async def test_a_failed_persist_is_visible_and_the_session_can_resume(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server.services.persist, "not_ready_s", 2.0)
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    ready = await start(ws)
    await speak_until_final(ws, (81, 0))
    _fail_caption_writes(server, True)
    for sample in (82, 0):
        await ws.send(chunk(sample))
    messages = await asyncio.wait_for(collect(ws), 15)
    assert messages[-1]["type"] == "error" and messages[-1]["code"] == "storage_unavailable"
    assert ws.close_code == 1013  # try again later: the page reconnects and resumes
    readyz = httpx.get(server.base_url + "/readyz")
    assert readyz.status_code == 503 and readyz.json()["checks"]["persisting"] is False
    assert "captions_persist_failures_total 3.0" in httpx.get(server.base_url + "/metrics").text
    _fail_caption_writes(server, False)
    await asyncio.sleep(2.1)
    assert httpx.get(server.base_url + "/readyz").status_code == 200
    again = await open_ws(server, ticket(api, meeting_id))
    resumed = await start(again, resume_token=ready["resume_token"], last_seq=1, audio_s=2.24)
    assert resumed["resume_from_s"] == 1.12  # "word82" was never stored: its audio is asked for again
    for sample in (82, 0, 83, 0):
        await again.send(chunk(sample))
    await again.send(json.dumps({"type": "stop"}))
    got = [(m["seq"], m["text"], m["start_s"]) for m in finals(await collect(again))]
    assert got == [(2, "word82", 1.12), (3, "word83", 2.24)]  # the failed final is recovered, times true
    assert persisted(server) == [(1, "word81"), (2, "word82"), (3, "word83")]


# ----- item 5: after a crash the client sends its audio again from the end of the last stored final -----


@pytest.mark.parametrize(
    ("last_end_s", "audio_s", "buffered_from_s", "expected"),
    [
        (11.76, None, None, 11.76),  # a client that says nothing: the end of the stored finals
        (11.76, 13.44, 0.0, 11.76),  # the kill -9: restart where the stored finals end
        (11.76, 13.44, 12.0, 12.0),  # the client no longer holds 11.76-12.0: from its oldest audio
        (11.76, 11.2, 0.0, 11.2),  # never after the audio the client has
        (0.0, 50.0, 0.0, 20.0),  # at most max_resend_s (30) before audio_s
        (1.000031, 5.0, 0.0, 1.0),  # on a sample (1/16000 s)
    ],
)
def test_restart_point(last_end_s: float, audio_s: float, buffered_from_s: float, expected: float) -> None:
    from backend.sessions.caption_store import restart_point

    assert restart_point(last_end_s, audio_s, buffered_from_s, 30.0) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "held",
    [
        {"audio_s": -1},
        {"audio_s": "3"},
        {"audio_s": True},
        {"buffered_from_s": 1.0},
        {"audio_s": 2, "buffered_from_s": 3},
    ],
)
async def test_start_with_bad_held_audio_gets_a_typed_error(
    server: LiveServer, held: dict[str, object]
) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await ws.send(json.dumps({"type": "start", "chunk_s": 0.56, **held}))
    messages = await asyncio.wait_for(collect(ws), 10)
    assert messages[0]["type"] == "error" and messages[0]["code"] == "protocol"
    assert "audio_s" in messages[0]["message"] or "buffered_from_s" in messages[0]["message"]
    assert ws.close_code == 1008


async def test_a_resumed_client_may_send_its_backlog_at_once(tmp_path: Path) -> None:
    """The audio a client held while the server was down (here 11.76 s, beyond the 4 s burst and the 8 s
    busy lag) is accepted at once after a resume and decoded; later audio must keep to real time again."""
    settings = make_settings(tmp_path, idle_timeout_s=10.0)
    with LiveServer(settings, FakeEngine(step_delay_s=0.02)) as live:
        api, meeting_id = meeting(live)
        ws = await open_ws(live, ticket(api, meeting_id))
        ready = await start(ws)
        ws.transport.abort()
        await asyncio.sleep(0.3)
        again = await open_ws(live, ticket(api, meeting_id))
        resumed = await start(
            again, resume_token=ready["resume_token"], last_seq=0, audio_s=11.76, buffered_from_s=0.0
        )
        assert resumed["resume_from_s"] == 0.0
        backlog = [80 + i if i % 3 != 2 else 0 for i in range(21)]  # 21 chunks of 0.56 s
        for sample in backlog:
            await again.send(chunk(sample))
        await again.send(json.dumps({"type": "stop"}))
        messages = await asyncio.wait_for(collect(again), 30)
        assert [m for m in messages if m["type"] in ("error", "busy")] == []
        assert len(finals(messages)) == 7
        assert finals(messages)[-1]["start_s"] == pytest.approx(18 * 0.56)
        assert again.close_code == 1000
