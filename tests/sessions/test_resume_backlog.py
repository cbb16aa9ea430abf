"""A client's held audio, sent at once after ``ready``, is all captioned on a busy engine (issue 36 item 3).

docs/protocol.md "Resuming" step 4: after ``ready`` the client sends its backlog at once. Over a real link
the first chunk arrives a round trip before the rest (TCP's first window is smaller than a 0.56 s chunk),
so the server decoded it with nothing else queued, thought the stream had caught up, and counted the rest
of the backlog as lag: ``busy`` + 1013 within a second of ``ready``, and the words lost (12 of 12 probe runs
with 10-22 s of backlog). Here the server runs in its own process (kill -9 is real) on a decoder whose one
worker is shared by every stream (``SerialEngine``), kept busy by three other speakers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection

from backend.config import Settings
from tests.sessions.test_protocol import collect, finals, open_ws, persisted, start, ticket
from tests.support.fake_engine import chunk
from tests.support.server import login, make_settings
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow

CHUNK_S = 0.56
STEP_S = 0.1
"""Worker time of one step: three real-time speakers keep the one worker ~55 % busy."""
ROUND_TRIP_S = 0.1
"""Between the first chunk of a backlog and the rest, as a real link delivers them."""
BACKLOG_CHUNKS = 36
"""20.16 s of held audio: far beyond the 4 s burst and the 8 s busy lag."""


def settings_for(tmp_path: Path, **extra: Any) -> Settings:
    return make_settings(tmp_path, max_sessions_per_user=8, idle_timeout_s=20.0, **extra)


def held_audio(first_word: int, chunks: int) -> list[int]:
    """The fake decoder's script of ``chunks`` chunks: two words, then a pause that ends the sentence."""
    return [0 if i % 3 == 2 else first_word + i for i in range(chunks)]


def sentences(script: list[int], start_s: float) -> list[tuple[str, float]]:
    """The finals ``script`` must give: (text, start_s) per sentence."""
    out, words, began = [], [], 0.0
    for index, sample in enumerate(script):
        if sample == 0:
            out.append((" ".join(words), round(start_s + began, 3)))
            words = []
        else:
            began = index * CHUNK_S if not words else began
            words.append(f"word{sample}")
    return out


async def send_backlog(ws: ClientConnection, script: list[int]) -> None:
    """The held audio, at once after ``ready`` as docs/protocol.md says, as a link delivers it."""
    await ws.send(chunk(script[0]))
    await asyncio.sleep(ROUND_TRIP_S)
    for sample in script[1:]:
        await ws.send(chunk(sample))


async def speak_in_real_time(server: ServerProcess, api: httpx.Client, meeting_id: int, word: int) -> None:
    """A speaker talking until cancelled: one chunk every 0.56 s."""
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    reader = asyncio.create_task(collect(ws))
    try:
        for index in range(10_000):
            await ws.send(chunk(0 if index % 4 == 3 else word))
            await asyncio.sleep(CHUNK_S)
    finally:
        await ws.close()
        await reader


@contextlib.asynccontextmanager
async def busy_engine(server: ServerProcess, api: httpx.Client, meeting_id: int) -> AsyncIterator[None]:
    """Three other speakers keep the decoder busy for the block."""
    speakers = [asyncio.create_task(speak_in_real_time(server, api, meeting_id, 50 + n)) for n in range(3)]
    await asyncio.sleep(2 * CHUNK_S)
    try:
        yield
    finally:
        for task in speakers:
            task.cancel()
        await asyncio.gather(*speakers, return_exceptions=True)


async def send_and_stop(ws: ClientConnection, script: list[int]) -> list[dict[str, Any]]:
    await send_backlog(ws, script)
    await ws.send(json.dumps({"type": "stop"}))
    return await asyncio.wait_for(collect(ws), 60)


async def test_a_new_session_with_20_s_of_held_audio_is_captioned_on_a_busy_engine(tmp_path: Path) -> None:
    with ServerProcess(settings_for(tmp_path), step_s=STEP_S) as server:
        api = login(server.base_url)
        meeting_id = api.post("/api/meetings", json={"title": "Busy", "chunk_s": CHUNK_S}).json()["meeting"][
            "id"
        ]
        async with busy_engine(server, api, meeting_id):
            ws = await open_ws(server, ticket(api, meeting_id))
            held_s = round(BACKLOG_CHUNKS * CHUNK_S, 2)
            ready = await start(ws, audio_s=held_s, buffered_from_s=0.0)
            assert ready["resume_from_s"] == 0.0
            script = held_audio(100, BACKLOG_CHUNKS)
            messages = await send_and_stop(ws, script)
        assert [m for m in messages if m["type"] in ("busy", "error")] == []
        assert [(m["text"], m["start_s"]) for m in finals(messages)] == sentences(script, 0.0)
        assert ws.close_code == 1000


async def test_a_resume_after_kill_9_sends_its_held_audio_at_once_and_loses_nothing(tmp_path: Path) -> None:
    """Eight sentences: the first three are stored before the kill -9; the client held everything since,
    resumes on a new process whose decoder is busy, sends 20 s at once from ``resume_from_s``; every
    sentence is stored once, in order, on the session's clock."""
    settings = settings_for(tmp_path)
    script = held_audio(100, 3 * 3) + held_audio(200, BACKLOG_CHUNKS)  # 3 + 12 sentences
    first = ServerProcess(settings, step_s=STEP_S).start()
    try:
        api = login(first.base_url)
        meeting_id = api.post("/api/meetings", json={"title": "Crash", "chunk_s": CHUNK_S}).json()["meeting"][
            "id"
        ]
        ws = await open_ws(first, ticket(api, meeting_id))
        ready = await start(ws)
        stored = 0
        for sample in script[:9]:  # live speech: in real time
            await ws.send(chunk(sample))
            await asyncio.sleep(CHUNK_S)
        while stored < 3:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            stored += message["type"] == "final"
    finally:
        first.kill()
    with ServerProcess(settings, step_s=STEP_S, migrate=False) as second:
        api = login(second.base_url)
        async with busy_engine(second, api, meeting_id):
            again = await open_ws(second, ticket(api, meeting_id))
            captured_s = round(len(script) * CHUNK_S, 2)
            resumed = await start(
                again, resume_token=ready["resume_token"], last_seq=3, audio_s=captured_s, buffered_from_s=0.0
            )
            assert resumed["resume_from_s"] == pytest.approx(9 * CHUNK_S)
            messages = await send_and_stop(again, script[9:])
        assert [m for m in messages if m["type"] in ("busy", "error")] == []
        expected = sentences(script, 0.0)
        got = [(m["text"], m["start_s"]) for m in finals(messages)]
        assert got == expected[3:]
        assert [m["seq"] for m in finals(messages)] == list(range(4, len(expected) + 1))
        rows = [row for row in persisted(second) if row[1].startswith("word1") or row[1].startswith("word2")]
        assert [text for _, text in rows] == [text for text, _ in expected]
