"""Protocol v1 against a real uvicorn on 127.0.0.1 (the fake engine stands in for the decoder).

Each test maps to a row of docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from backend.engine.types import InputLevel
from tests.support.fake_engine import VOCAB_SAMPLE, FakeEngine, chunk
from tests.support.server import LiveServer, login, make_settings, query

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, idle_timeout_s=3.0, max_sessions=4, max_sessions_per_user=4)
    with LiveServer(settings, FakeEngine()) as live:
        yield live


def meeting(
    server: LiveServer, terms: list[Any] | None = None, chunk_s: float = 0.56
) -> tuple[httpx.Client, int]:
    api = login(server.base_url)
    vocab_ids = []
    if terms:
        vocab = api.post("/api/vocabularies", json={"name": "v"}).json()["vocabulary"]
        assert api.post(f"/api/vocabularies/{vocab['id']}/terms", json={"terms": terms}).status_code == 200
        vocab_ids = [vocab["id"]]
    created = api.post(
        "/api/meetings", json={"title": "Standup", "chunk_s": chunk_s, "vocabulary_ids": vocab_ids}
    )
    return api, created.json()["meeting"]["id"]


def ticket(api: httpx.Client, meeting_id: int) -> str:
    return api.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]


async def open_ws(
    server: LiveServer, ticket_value: str | None, origin: str | None = None
) -> ClientConnection:
    protocols = ["captions.v1"] + ([f"ticket.{ticket_value}"] if ticket_value else [])
    return await connect(
        server.ws_url,
        subprotocols=protocols,
        origin=origin or server.origin,
        max_size=2**20,
        compression=None,
    )


async def start(ws: ClientConnection, chunk_s: float = 0.56, **extra: Any) -> dict[str, Any]:
    await ws.send(json.dumps({"type": "start", "chunk_s": chunk_s, **extra}))
    ready = json.loads(await ws.recv())
    assert ready["type"] == "ready", ready
    return ready


async def speak_until_final(ws: ClientConnection, samples: Iterable[int]) -> dict[str, Any]:
    """Send a fake-engine chunk per sample (0: a pause) and read up to the first final; returns it."""
    for sample in samples:
        await ws.send(chunk(sample))
    while (message := json.loads(await ws.recv()))["type"] != "final":
        pass
    return message


async def collect(ws: ClientConnection) -> list[dict[str, Any]]:
    """Every message until the server closes the socket."""
    messages = []
    try:
        async for raw in ws:
            messages.append(json.loads(raw))
    except ConnectionClosed:
        pass
    return messages


def finals(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == "final"]


def persisted(server: LiveServer) -> list[tuple[int, str]]:
    return query(server.settings.database_url, "SELECT seq, text FROM caption_segments ORDER BY seq")


async def test_stream_finals_are_persisted_and_stop_flushes(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    assert ws.subprotocol == "captions.v1"
    ready = await start(ws)
    assert ready["chunk_samples"] == 8960
    for sample in (11, 12, 0, 13):
        await ws.send(chunk(sample))
    await ws.send(json.dumps({"type": "stop"}))
    messages = await collect(ws)
    assert [m["text"] for m in finals(messages)] == ["word11 word12", "word13"]
    assert [m["seq"] for m in finals(messages)] == [1, 2]
    assert messages[-1]["type"] == "stopped"
    assert ws.close_code == 1000
    assert persisted(server) == [(1, "word11 word12"), (2, "word13")]
    partials = [m["text"] for m in messages if m["type"] == "partial"]
    assert partials[:2] == ["word11", "word11 word12"]


async def test_oversized_frame_closes_1009(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    await ws.send(b"\x00" * (server.settings.max_ws_message_bytes + 1))
    await collect(ws)
    assert ws.close_code == 1009


async def test_wrong_chunk_size_closes_1008_with_error(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    await ws.send(b"\x01\x00" * 100)
    messages = await collect(ws)
    assert ws.close_code == 1008
    assert messages[-1]["type"] == "error" and "exactly" in messages[-1]["message"]


async def test_origin_is_checked_before_accept(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, ticket(api, meeting_id), origin="https://evil.example")
    assert info.value.response.status_code == 403


async def test_tickets_missing_reused_and_expired_are_rejected(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    with pytest.raises(InvalidStatus) as missing:
        await open_ws(server, None)
    assert missing.value.response.status_code == 403
    value = ticket(api, meeting_id)
    ws = await open_ws(server, value)
    await ws.close()
    with pytest.raises(InvalidStatus) as reused:
        await open_ws(server, value)
    assert reused.value.response.status_code == 403
    expired = ticket(api, meeting_id)
    engine = sa.create_engine(server.settings.database_url.replace("+aiosqlite", ""))
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE tickets SET expires_at = '2000-01-01 00:00:00.000000'"))
    engine.dispose()
    with pytest.raises(InvalidStatus) as old:
        await open_ws(server, expired)
    assert old.value.response.status_code == 403


async def test_audio_faster_than_real_time_closes_1008(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    try:
        for _ in range(60):  # 60 x 0.56 s = 33.6 s of audio sent as fast as possible
            await ws.send(chunk(5))
    except ConnectionClosed:
        pass
    await asyncio.wait_for(collect(ws), 10)
    assert ws.close_code == 1008
    assert "real time" in (ws.close_reason or "")


async def test_idle_client_is_closed_but_keepalive_keeps_it(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    idle = await open_ws(server, ticket(api, meeting_id))
    alive = await open_ws(server, ticket(api, meeting_id))
    await start(idle)
    await start(alive)
    for _ in range(5):
        await asyncio.sleep(1.0)
        await alive.send(json.dumps({"type": "keepalive"}))
    await asyncio.wait_for(collect(idle), 5)
    assert idle.close_code == 1008 and "idle" in idle.close_reason
    assert alive.close_code is None
    await alive.close()


async def test_per_message_deflate_is_off(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await connect(
        server.ws_url,
        subprotocols=["captions.v1", f"ticket.{ticket(api, meeting_id)}"],
        origin=server.origin,
    )  # the client offers permessage-deflate by default
    assert "permessage-deflate" not in (ws.response.headers.get("sec-websocket-extensions") or "")
    await ws.close()


async def test_capacity_cap_answers_503(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    sockets = [await open_ws(server, ticket(api, meeting_id)) for _ in range(4)]
    for ws in sockets:
        await start(ws)
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, ticket(api, meeting_id))
    assert info.value.response.status_code == 503
    assert httpx.get(server.base_url + "/readyz").json()["checks"]["capacity"] is False
    for ws in sockets:
        await ws.close()


async def test_vocabulary_display_form_and_matched_terms(server: LiveServer) -> None:
    api, meeting_id = meeting(server, [{"text": "linezolid", "display": "Linezolid"}])
    ws = await open_ws(server, ticket(api, meeting_id))
    ready = await start(ws)
    assert ready["terms"] == ["Linezolid"]
    for sample in (21, VOCAB_SAMPLE, 0):
        await ws.send(chunk(sample))
    await ws.send(json.dumps({"type": "stop"}))
    final = finals(await collect(ws))[0]
    assert final["text"] == "word21 Linezolid"
    assert final["matched_terms"] == ["Linezolid"]
    stats = api.get(f"/api/stats/terms?meeting_id={meeting_id}").json()["terms"]
    assert stats == [
        {"vocabulary_id": stats[0]["vocabulary_id"], "term": "linezolid", "display": "Linezolid", "hits": 1}
    ]


async def test_configure_reports_bad_terms_and_acknowledges_good_ones(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    await ws.send(json.dumps({"type": "configure", "terms": ["ok", "bad\u0007"]}))
    error = json.loads(await ws.recv())
    assert error["code"] == "invalid_terms" and error["errors"][0]["index"] == 1
    await ws.send(json.dumps({"type": "configure", "terms": ["vancomycin"]}))
    configured = json.loads(await ws.recv())
    assert configured["type"] == "configured" and configured["terms"][0]["text"] == "vancomycin"
    await ws.send(chunk(VOCAB_SAMPLE))
    await ws.send(json.dumps({"type": "stop"}))
    assert finals(await collect(ws))[0]["text"] == "vancomycin"
    engine: FakeEngine = server.services.engine
    for _ in range(50):  # the session releases its own registration right after closing
        if not engine.live_handles and not engine.open_streams:
            break
        await asyncio.sleep(0.05)
    assert engine.live_handles == set()
    assert engine.open_streams == set()


async def test_decoder_failure_closes_1011_and_marks_not_ready(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    server.services.engine.fail_next = True
    await ws.send(chunk(3))
    messages = await collect(ws)
    assert messages[-1]["code"] == "decoder_failed"
    assert ws.close_code == 1011
    assert httpx.get(server.base_url + "/readyz").status_code == 503


async def test_disconnect_commits_last_words_and_resume_replays_after_restart(
    tmp_path: Path, database_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=database_url)
    with LiveServer(settings, FakeEngine()) as first:
        api, meeting_id = meeting(first)
        ws = await open_ws(first, ticket(api, meeting_id))
        ready = await start(ws)
        for sample in (31, 0, 32):
            await ws.send(chunk(sample))
        got = []
        while len(got) < 1:
            message = json.loads(await ws.recv())
            if message["type"] == "final":
                got.append(message)
        await ws.close()  # vanishes with "word32" not yet final
        await asyncio.sleep(0.5)
    # a new server instance on the same database
    with LiveServer(settings, FakeEngine(), migrate=False) as second:
        api = login(second.base_url)
        ws = await open_ws(second, ticket(api, meeting_id))
        again = await start(ws, resume_token=ready["resume_token"], last_seq=got[-1]["seq"])
        assert again["session_id"] == ready["session_id"]
        replay = json.loads(await ws.recv())
        assert (replay["seq"], replay["text"]) == (2, "word32")
        await ws.send(chunk(33))
        await ws.send(json.dumps({"type": "stop"}))
        rest = finals(await collect(ws))
        assert [(m["seq"], m["text"]) for m in rest] == [(3, "word33")]
        assert rest[0]["start_s"] >= replay["end_s"]
        assert persisted(second) == [(1, "word31"), (2, "word32"), (3, "word33")]


async def test_drain_flushes_each_session_then_1012(tmp_path: Path) -> None:
    live = LiveServer(make_settings(tmp_path), FakeEngine()).start()
    api, meeting_id = meeting(live)
    sockets = [await open_ws(live, ticket(api, meeting_id)) for _ in range(3)]
    for n, ws in enumerate(sockets):
        await start(ws)
        await ws.send(chunk(40 + n))
        assert json.loads(await ws.recv())["type"] == "partial"
    stopper = asyncio.get_running_loop().run_in_executor(None, live.stop)
    results = [await asyncio.wait_for(collect(ws), 30) for ws in sockets]
    await stopper
    for n, (ws, messages) in enumerate(zip(sockets, results, strict=True)):
        kinds = [m["type"] for m in messages]
        assert kinds.index("reconnect") < kinds.index("final")
        assert finals(messages)[0]["text"] == f"word{40 + n}"
        assert ws.close_code == 1012
    assert sorted(t for _, t in persisted(live)) == ["word40", "word41", "word42"]


async def test_logs_name_the_session_but_never_tickets_or_tokens(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(tmp_path, log_level="info")
    with LiveServer(settings, FakeEngine()) as live:
        api, meeting_id = meeting(live)
        secret = ticket(api, meeting_id)
        ws = await open_ws(live, secret)
        ready = await start(ws)
        await ws.send(chunk(9))
        await ws.send(json.dumps({"type": "stop"}))
        await collect(ws)
        with pytest.raises(InvalidStatus):
            await open_ws(live, secret)  # reused: logged as a rejection, without the ticket
    logs = capfd.readouterr().err
    assert ready["session_id"] in logs
    assert "session_started" in logs and "session_closed" in logs and "ws_rejected" in logs
    assert secret not in logs
    assert ready["resume_token"] not in logs
    assert api.headers["x-csrf-token"] not in logs


def test_uvicorn_is_configured_as_reliability_requires(tmp_path: Path) -> None:
    from backend.app import create_app
    from backend.server import server_config

    settings = make_settings(tmp_path)
    config = server_config(create_app(settings, engine=FakeEngine()), settings, "127.0.0.1", settings.port)
    assert config.ws == "websockets"
    assert config.ws_max_size == 65536
    assert config.ws_per_message_deflate is False
    assert (config.ws_ping_interval, config.ws_ping_timeout) == (20.0, 20.0)
    sockets = settings.max_sessions + settings.max_viewers  # uvicorn counts them; it must not starve HTTP
    assert config.limit_concurrency is not None
    assert config.limit_concurrency >= sockets + 2 * settings.max_http_requests
    assert config.timeout_graceful_shutdown > settings.drain_timeout_s


async def test_metrics_count_sessions_and_finals(server: LiveServer) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    during = httpx.get(server.base_url + "/metrics").text
    assert "captions_sessions 1.0" in during
    await ws.send(chunk(9))
    await ws.send(json.dumps({"type": "stop"}))
    await collect(ws)
    after = httpx.get(server.base_url + "/metrics").text
    assert "captions_finals_persisted_total 1.0" in after
    assert "captions_engine_ready 1.0" in after
    assert 'captions_engine_decoding_ms_per_audio_second{decoding="greedy"} 1.5' in after  # the engine's cost


async def speak_and_drop(server: LiveServer, api: httpx.Client, meeting_id: int) -> dict[str, Any]:
    """Three words (finals word61..63), then the client vanishes while a slow engine (0.45 s a step) still
    has ~2 s of its audio queued; returns the ``ready`` message (resume token)."""
    ws = await open_ws(server, ticket(api, meeting_id))
    ready = await start(ws)
    for sample in (61, 0, 62, 0, 63):
        await ws.send(chunk(sample))
    await ws.close()
    return ready


async def test_resume_while_the_dropped_connection_is_still_flushing_loses_nothing(tmp_path: Path) -> None:
    """The client reconnects at once while the server is still decoding its last chunks (load-test finding):
    the new connection waits for the old one, replays its finals, numbers on after them, and its audio
    continues on the session's clock where the stored finals end."""
    with LiveServer(make_settings(tmp_path), FakeEngine(step_delay_s=0.45)) as live:
        api, meeting_id = meeting(live)
        ready = await speak_and_drop(live, api, meeting_id)
        again = await open_ws(live, ticket(api, meeting_id))
        resumed = await start(again, resume_token=ready["resume_token"], last_seq=0, audio_s=2.8)
        assert resumed["resume_from_s"] == 2.8  # all five chunks were decoded: nothing to send again
        await again.send(chunk(64))
        await again.send(json.dumps({"type": "stop"}))
        messages = finals(await asyncio.wait_for(collect(again), 30))
        got = [(m["seq"], m["text"]) for m in messages]
        assert got == [(1, "word61"), (2, "word62"), (3, "word63"), (4, "word64")]
        assert (messages[-1]["start_s"], messages[-1]["end_s"]) == (2.8, 3.36)
        assert again.close_code == 1000
        assert persisted(live) == got


SPOKEN = (61, 0, 62, 0, 63)  # word61 0-1.12 s, word62 1.12-2.24 s, word63 from 2.24 s (0.56 s chunks)


@pytest.mark.parametrize("speaks_again", [True, False], ids=["speaks-on-b", "stops-at-once"])
async def test_resume_on_another_replica_while_the_first_still_flushes_loses_nothing(
    tmp_path: Path, database_url: str, speaks_again: bool
) -> None:
    """Scale-out: the client resumes on replica B while replica A still holds undecoded chunks of the
    dropped connection. Once B owns the session A can store nothing more; B's ``ready`` says where the
    stored finals end, the client sends its audio again from there, and B decodes it: every word once, at
    its true time, numbered on after what A had stored."""
    shared = {"database_url": database_url}
    gate = threading.Semaphore(0)
    with (
        LiveServer(make_settings(tmp_path, **shared), FakeEngine(gate=gate)) as replica_a,
        LiveServer(make_settings(tmp_path, **shared), FakeEngine(), migrate=False) as replica_b,
    ):
        api, meeting_id = meeting(replica_a)
        ws = await open_ws(replica_a, ticket(api, meeting_id))
        ready = await start(ws)
        for sample in SPOKEN:
            await ws.send(chunk(sample))
        gate.release(2)  # A decodes "word61" and its pause, then waits on the third chunk
        first = json.loads(await ws.recv())
        while first["type"] != "final":
            first = json.loads(await ws.recv())
        assert (first["seq"], first["text"], first["end_s"]) == (1, "word61", 1.12)
        ws.transport.abort()  # the network drops; A still holds three undecoded chunks

        again = await open_ws(replica_b, ticket(api, meeting_id))
        resumed = await start(
            again, resume_token=ready["resume_token"], last_seq=1, audio_s=2.8, buffered_from_s=0.0
        )
        assert (resumed["session_id"], resumed["resume_from_s"]) == (ready["session_id"], 1.12)
        gate.release(100)  # A decodes the rest now: its late finals must not be stored
        for _ in range(100):
            if not replica_a.services.hub.sessions:
                break
            await asyncio.sleep(0.1)
        assert not replica_a.services.hub.sessions
        for sample in SPOKEN[2:]:  # the audio from 1.12 s, as resume_from_s asks
            await again.send(chunk(sample))
        if speaks_again:
            await again.send(chunk(64))
        await again.send(json.dumps({"type": "stop"}))
        messages = await asyncio.wait_for(collect(again), 30)
        got = [(m["seq"], m["text"], m["start_s"]) for m in finals(messages)]
        last = "word63 word64" if speaks_again else "word63"
        assert got == [(2, "word62", 1.12), (3, last, 2.24)]
        assert persisted(replica_a) == [(1, "word61"), (2, "word62"), (3, last)]
        assert messages[-1] == {"type": "stopped", "finals": 3}
        assert again.close_code == 1000


async def test_a_quiet_or_clipping_microphone_is_told_once_per_change(tmp_path: Path) -> None:
    """The engine's level meter says quiet / loud / ok with each chunk; the speaker gets ``input_level`` only
    when that changes, with the sentence their page shows."""
    engine = FakeEngine()
    with LiveServer(make_settings(tmp_path), engine) as server:
        await _levels_are_told(server, engine)


async def _levels_are_told(server: LiveServer, engine: FakeEngine) -> None:
    api, meeting_id = meeting(server)
    ws = await open_ws(server, ticket(api, meeting_id))
    await start(ws)
    seen: list[dict[str, Any]] = []

    async def say(sample: int, level: InputLevel | None) -> None:
        engine.input_level = level
        await ws.send(chunk(sample))
        while (message := json.loads(await ws.recv()))["type"] != "partial":
            seen.append(message)

    quiet = InputLevel("quiet", -52.3, -38.0, 25.7)
    await say(11, InputLevel("ok", -50.0, -38.0, 24.0))
    await say(12, quiet)
    await say(13, quiet)
    await say(14, InputLevel("loud", -4.0, 0.0, 0.0))
    await say(15, InputLevel("ok", -20.0, -3.0, 0.0))
    levels = [m for m in seen if m["type"] == "input_level"]
    assert [m["state"] for m in levels] == ["quiet", "loud", "ok"]
    assert levels[0] == {
        "type": "input_level",
        "state": "quiet",
        "speech_dbfs": -52.3,
        "peak_dbfs": -38.0,
        "gain_db": 25.7,
        "message": "Your microphone is very quiet: move closer to it or turn its input level up.",
    }
    assert "too loud" in levels[1]["message"] and levels[2]["message"] == ""
    metrics = httpx.get(f"{server.base_url}/metrics").text
    assert 'captions_input_level_messages_total{state="quiet"} 1.0' in metrics
    await ws.close()
