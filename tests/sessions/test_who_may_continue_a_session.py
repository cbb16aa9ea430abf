"""Who may continue a caption session, and with what clock (issue 36 items 4 and 5), on a real server."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event
from websockets.exceptions import InvalidStatus

from tests.meeting_view.test_view_socket import member, open_view, until
from tests.sessions.test_protocol import (
    collect,
    finals,
    meeting,
    open_ws,
    persisted,
    speak_until_final,
    start,
    ticket,
)
from tests.support.fake_engine import FakeEngine, chunk
from tests.support.server import LiveServer, make_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path, idle_timeout_s=5.0), FakeEngine()) as live:
        yield live


async def test_a_resume_token_works_only_for_the_user_it_was_given_to(server: LiveServer) -> None:
    """Another member of the meeting who holds a colleague's resume token gets ``resume_expired``: none of
    the colleague's finals, no way to speak as them, and the colleague's live connection goes on."""
    admin, meeting_id = meeting(server)
    nurse, _ = member(server, admin)
    assert admin.post(f"/api/meetings/{meeting_id}/members", json={"username": "nurse"}).status_code == 201
    owner = await open_ws(server, ticket(admin, meeting_id))
    ready = await start(owner)
    await speak_until_final(owner, (11, 0))

    thief = await open_ws(server, ticket(nurse, meeting_id))
    await thief.send(
        json.dumps({"type": "start", "chunk_s": 0.56, "resume_token": ready["resume_token"], "last_seq": 0})
    )
    taken = await asyncio.wait_for(collect(thief), 10)
    assert [(m["type"], m.get("code")) for m in taken] == [("error", "resume_expired")]
    assert thief.close_code == 1008

    for sample in (12, 0):
        await owner.send(chunk(sample))
    await owner.send(json.dumps({"type": "stop"}))
    rest = await asyncio.wait_for(collect(owner), 10)
    assert [(m["seq"], m["text"]) for m in finals(rest)] == [(2, "word12")]
    assert owner.close_code == 1000
    assert persisted(server) == [(1, "word11"), (2, "word12")]


async def test_audio_s_is_bounded_by_the_sessions_age(server: LiveServer) -> None:
    """``audio_s`` 9,999,999 used to be accepted and move the session's clock ~115 days; now a session's
    clock may run ahead of its age only by what a client may hold (max_resend_s + audio_burst_s = 34 s)."""
    api, meeting_id = meeting(server)
    fresh = await open_ws(server, ticket(api, meeting_id))
    await fresh.send(json.dumps({"type": "start", "chunk_s": 0.56, "audio_s": 34.5, "buffered_from_s": 0}))
    refused = await asyncio.wait_for(collect(fresh), 10)
    assert [(m["type"], m["code"]) for m in refused] == [("error", "protocol")]
    assert "audio_s" in refused[0]["message"] and fresh.close_code == 1008

    owner = await open_ws(server, ticket(api, meeting_id))
    ready = await start(owner, audio_s=30.0, buffered_from_s=0.0)  # a full ring from before: accepted
    await owner.close()
    resume = {"type": "start", "chunk_s": 0.56, "resume_token": ready["resume_token"], "last_seq": 0}
    far = await open_ws(server, ticket(api, meeting_id))
    await far.send(json.dumps(resume | {"audio_s": 9_999_999, "buffered_from_s": 9_999_990}))
    refused = await asyncio.wait_for(collect(far), 10)
    assert [(m["type"], m["code"]) for m in refused] == [("error", "protocol")]

    near = await open_ws(server, ticket(api, meeting_id))
    resumed = await start(near, **resume | {"audio_s": 31.12, "buffered_from_s": 1.0})
    assert resumed["resume_from_s"] == 1.12
    await near.send(chunk(11))
    await near.send(chunk(0))
    await near.send(json.dumps({"type": "stop"}))
    (final,) = finals(await asyncio.wait_for(collect(near), 10))
    assert (final["start_s"], final["end_s"]) == (1.12, 2.24)


class FullDisk:
    """Every write of the server's database fails as SQLite fails on a full disk, until ``free()``."""

    def __init__(self, server: LiveServer) -> None:
        self.engine = server.services.db.engine.sync_engine
        event.listen(self.engine, "before_cursor_execute", self._refuse_writes)

    @staticmethod
    def _refuse_writes(*args: object) -> None:
        statement = str(args[2]).lstrip().upper()
        if statement.startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")

    def free(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._refuse_writes)


async def test_a_full_disk_is_a_typed_503_and_sessions_resume_as_soon_as_it_is_freed(
    server: LiveServer,
) -> None:
    """A REST write on a full disk was a plain 500; after the disk was freed, handshakes stayed 503 for
    ~28 s (nothing could store the caption that would have proved it). Now: 503 ``storage_unavailable``
    with Retry-After, and a session resumes within a couple of seconds of the disk being freed."""
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    ready = await start(ws)
    await speak_until_final(ws, (81, 0))
    disk = FullDisk(server)
    for sample in (82, 0):
        await ws.send(chunk(sample))
    failed = await asyncio.wait_for(collect(ws), 15)
    assert failed[-1]["code"] == "storage_unavailable" and ws.close_code == 1013

    refused = api.post("/api/meetings", json={"title": "On a full disk"})
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "storage_unavailable"
    assert refused.headers["retry-after"] == "5"
    readyz = httpx.get(server.base_url + "/readyz")
    assert readyz.status_code == 503 and readyz.json()["checks"]["persisting"] is False

    disk.free()
    freed_at = time.monotonic()
    while True:
        try:
            again = await open_ws(server, ticket(api, meeting_id))
            break
        except InvalidStatus as exc:
            assert exc.response.status_code == 503
            assert time.monotonic() - freed_at < 5, "handshakes still refused after the disk was freed"
            await asyncio.sleep(0.2)
    resumed = await start(again, resume_token=ready["resume_token"], last_seq=1, audio_s=2.24)
    assert resumed["resume_from_s"] == 1.12
    for sample in (82, 0):
        await again.send(chunk(sample))
    await again.send(json.dumps({"type": "stop"}))
    assert [(m["seq"], m["text"]) for m in finals(await collect(again))] == [(2, "word82")]
    assert persisted(server) == [(1, "word81"), (2, "word82")]
    assert httpx.get(server.base_url + "/readyz").status_code == 200


async def test_revoking_an_api_token_ends_the_sockets_its_tickets_opened(tmp_path: Path) -> None:
    """A socket kept streaming after the API token that issued its ticket was revoked. Now the speaker's
    session is flushed, told ``token_revoked`` and closed 1008, at once on the replica that revoked it and
    within ``token_check_s`` on another; a viewer opened with such a ticket is closed too, while a cookie
    session's socket goes on."""
    shared = {"idle_timeout_s": 10.0, "token_check_s": 0.3}
    with (
        LiveServer(make_settings(tmp_path, **shared), FakeEngine()) as here,
        LiveServer(make_settings(tmp_path, **shared), FakeEngine(), migrate=False) as there,
    ):
        admin, meeting_id = meeting(here)
        tokens = [admin.post("/api/tokens", json={"name": f"script{n}"}).json() for n in range(2)]
        scripts = [
            httpx.Client(base_url=here.base_url, headers={"authorization": f"Bearer {t['token']}"})
            for t in tokens
        ]
        speaking_here = await open_ws(here, ticket(scripts[0], meeting_id))
        speaking_there = await open_ws(there, ticket(scripts[1], meeting_id))
        viewing = await open_view(here, f"ticket.{ticket(scripts[0], meeting_id)}")
        by_cookie = await open_ws(here, ticket(admin, meeting_id))
        for ws in (speaking_here, speaking_there, by_cookie):
            await start(ws)
            await ws.send(chunk(11))
        await until(viewing, "caught_up")

        for token in tokens:
            assert admin.delete(f"/api/tokens/{token['id']}").status_code == 200
        for ws in (speaking_here, speaking_there):
            ended = await asyncio.wait_for(collect(ws), 10)
            assert [m["text"] for m in finals(ended)] == ["word11"]  # its words were kept
            assert ended[-1] == {"type": "error", "code": "token_revoked", "message": "API token revoked"}
            assert ws.close_code == 1008
        told = await asyncio.wait_for(collect(viewing), 10)
        assert told[-1]["code"] == "token_revoked" and viewing.close_code == 1008

        await by_cookie.send(chunk(0))
        await by_cookie.send(json.dumps({"type": "stop"}))
        assert [m["text"] for m in finals(await collect(by_cookie))] == ["word11"]
        assert by_cookie.close_code == 1000
