"""Who may continue a caption session, and with what clock (issue 36 items 4 and 5), on a real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_engine import FakeEngine, chunk
from tests.support.server import LiveServer, make_settings
from tests.test_meeting_view_protocol import member
from tests.test_protocol import collect, finals, meeting, open_ws, persisted, start, ticket

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
    owner = await open_ws(server, ticket(admin, meeting_id))
    ready = await start(owner)
    for sample in (11, 0):
        await owner.send(chunk(sample))
    while json.loads(await owner.recv())["type"] != "final":
        pass

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
