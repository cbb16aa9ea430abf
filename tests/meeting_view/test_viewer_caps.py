"""Viewers cannot take HTTP down (issue 36 item 2), against a real uvicorn on 127.0.0.1.

uvicorn counted every open WebSocket against its ``limit_concurrency`` (then 64 x 4 + 100 = 356) and answered
every HTTP request 503 beyond it, /healthz included, while it never refused an upgrade: 354 viewer sockets
on one view-only link stopped logins, tickets and probes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tests.meeting_view.test_view_socket import live_meeting, open_view, ticket
from tests.sessions.test_protocol import open_ws, start
from tests.support.fake_engine import FakeEngine
from tests.support.server import LiveServer, login, make_settings

pytestmark = pytest.mark.slow


def view_link(admin: httpx.Client, meeting_id: int) -> str:
    created = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": "Gallery"})
    assert created.status_code == 201, created.text
    return f"link.{created.json()['token']}"


async def open_viewers(server: LiveServer, credential: str, count: int) -> list[ClientConnection]:
    """``count`` viewer sockets, opened 50 at a time."""
    sockets: list[ClientConnection] = []
    for first in range(0, count, 50):
        batch = range(first, min(count, first + 50))
        sockets += await asyncio.gather(*(open_view(server, credential) for _ in batch))
    return sockets


async def first_message(ws: ClientConnection) -> dict[str, object]:
    return json.loads(await asyncio.wait_for(ws.recv(), 30))


async def closed_with(ws: ClientConnection) -> tuple[dict[str, object], int | None]:
    """The refusal a viewer got, and its close code."""
    message = await first_message(ws)
    try:
        await asyncio.wait_for(ws.recv(), 10)
    except ConnectionClosed:
        pass
    return message, ws.close_code


async def test_400_viewers_on_one_link_leave_probes_logins_and_speakers_working(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, max_viewers_per_link=380, max_viewers_per_client=1000)
    with LiveServer(settings, FakeEngine()) as server:
        admin = login(server.base_url)
        meeting_id = live_meeting(admin)
        sockets = await open_viewers(server, view_link(admin, meeting_id), 400)
        firsts = await asyncio.gather(*(first_message(ws) for ws in sockets))
        open_ones = [ws for ws, m in zip(sockets, firsts, strict=True) if m["type"] == "ready"]
        refused = [ws for ws, m in zip(sockets, firsts, strict=True) if m["type"] == "error"]
        assert len(open_ones) == 380 and len(refused) == 20
        assert {m["code"] for m in firsts if m["type"] == "error"} == {"too_many_viewers"}
        assert {m.get("limit") for m in firsts if m["type"] == "error"} == {"link"}
        for ws in refused:
            await asyncio.wait_for(ws.wait_closed(), 10)
            assert ws.close_code == 1013
        assert server.services.hub.viewer_slots.total == 380

        assert httpx.get(server.base_url + "/healthz").status_code == 200
        assert httpx.get(server.base_url + "/readyz").status_code == 200
        speaker = login(server.base_url)  # raises unless the login answers 200
        speaking = await open_ws(server, ticket(speaker, meeting_id))
        assert (await start(speaking))["type"] == "ready"
        await speaking.close()
        await asyncio.gather(*(ws.close() for ws in open_ones))
        for _ in range(50):
            if server.services.hub.viewer_slots.total == 0:
                break
            await asyncio.sleep(0.1)
        assert server.services.hub.viewer_slots.total == 0


async def test_viewers_are_capped_per_client_address_and_per_replica(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, max_viewers=5, max_viewers_per_client=3)
    with LiveServer(settings, FakeEngine()) as server:
        admin = login(server.base_url)
        meeting_id = live_meeting(admin)
        link = view_link(admin, meeting_id)
        three = await open_viewers(server, link, 3)
        assert [(await first_message(ws))["type"] for ws in three] == ["ready"] * 3
        message, code = await closed_with(await open_view(server, link))
        assert (message["code"], message["limit"], code) == ("too_many_viewers", "client", 1013)

        server.services.hub.viewer_slots.per_client.clear()  # as if the next ones came from elsewhere
        two_more = await open_viewers(server, f"ticket.{ticket(admin, meeting_id)}", 1)
        two_more += await open_viewers(server, link, 1)
        assert [(await first_message(ws))["type"] for ws in two_more] == ["ready"] * 2
        message, code = await closed_with(await open_view(server, link))
        assert (message["limit"], code) == ("replica", 1013)
        assert "try again later" in str(message["message"])


async def test_http_requests_are_capped_but_the_probes_never_wait(tmp_path: Path) -> None:
    """Two requests whose bodies never finish hold both HTTP slots: a third request gets a typed 503 with
    Retry-After, /healthz and /readyz still answer 200."""
    settings = make_settings(tmp_path, max_http_requests=2)
    with LiveServer(settings, FakeEngine()) as server:
        host, port = "127.0.0.1", settings.port
        stalled = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(
                b"POST /api/auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 100\r\n\r\n{"
            )
            await writer.drain()
            stalled.append((reader, writer))
        await asyncio.sleep(0.5)
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            busy = await client.get("/api/auth/me")
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            assert busy.json()["error"]["code"] == "busy"
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            for _, writer in stalled:
                writer.close()
            await asyncio.sleep(0.5)
            assert (await client.get("/api/auth/me")).status_code == 401  # slots given back
