"""The Deepgram-compatible live socket (issue 47), driven by the unmodified ``deepgram-sdk`` against a real
server with the bundled model."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import httpx
import numpy as np
import pytest
from deepgram import AsyncDeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.compat.conftest import OTHER_TERM, TERM
from tests.support.server import LiveServer

pytestmark = pytest.mark.slow
FRAME_BYTES = 3200  # 0.1 s of PCM16 at 16 kHz: any size is accepted


def pcm(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


def deepgram(server: LiveServer, key: str) -> AsyncDeepgramClient:
    ws_base = server.base_url.replace("http", "ws")
    environment = DeepgramClientEnvironment(
        base=server.base_url, production=ws_base, agent=ws_base, agent_rest=server.base_url
    )
    return AsyncDeepgramClient(api_key=key, environment=environment)


async def stream(
    server: LiveServer, key: str, audio: np.ndarray, finalize_at: int | None = None, **params: Any
) -> list[Any]:
    """Stream ``audio`` at 1.4x real time with the SDK; every message it parsed, up to the close."""
    messages: list[Any] = []
    client = deepgram(server, key)
    async with client.listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, **params
    ) as socket:

        async def receive() -> None:
            async for message in socket:
                messages.append(message)

        receiver = asyncio.create_task(receive())
        data = pcm(audio)
        for n, start in enumerate(range(0, len(data), FRAME_BYTES)):
            await socket.send_media(data[start : start + FRAME_BYTES])
            if n == finalize_at:
                await socket.send_finalize()
            await asyncio.sleep(0.1 / 1.4)
        await socket.send_close_stream()
        await asyncio.wait_for(receiver, 60)
    return messages


def finals_text(messages: list[Any]) -> str:
    return " ".join(
        m.channel.alternatives[0].transcript for m in messages if m.type == "Results" and m.is_final
    )


async def test_keyterms_are_each_streams_own_and_results_follow_deepgrams_shape(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    """Three streams at once on one replica: only the one whose keyterm is the name hears it; the plain
    stream and one with another keyterm miss it (the same audio)."""
    boosted, other, plain = await asyncio.gather(
        stream(
            real_server,
            api_token,
            speech,
            keyterm=[TERM],
            interim_results="true",
            punctuate="true",
            vad_events="true",
            utterance_end_ms="1000",
        ),
        stream(real_server, api_token, speech, keyterm=[OTHER_TERM], punctuate="true"),
        stream(real_server, api_token, speech, punctuate="true"),
    )
    assert TERM in finals_text(boosted), finals_text(boosted)
    assert TERM.lower() not in finals_text(other).lower(), finals_text(other)
    assert TERM.lower() not in finals_text(plain).lower(), finals_text(plain)
    kinds = [m.type for m in boosted]
    assert "SpeechStarted" in kinds and "UtteranceEnd" in kinds and kinds[-1] == "Metadata"
    interims = [m for m in boosted if m.type == "Results" and not m.is_final]
    assert interims and any(m.channel.alternatives[0].transcript for m in interims)
    assert not [m for m in other if m.type == "Results" and not m.is_final]
    final = next(m for m in boosted if m.type == "Results" and m.is_final and m.speech_final)
    words = final.channel.alternatives[0].words
    assert words and words[0].start <= words[-1].end and final.duration > 0
    assert any(w.punctuated_word == TERM for w in words) or TERM in final.channel.alternatives[0].transcript
    assert boosted[-1].duration > len(speech) / 16000 - 0.6 and boosted[-1].channels == 1
    # persisted into a dictation of the token's owner, who reads it like any transcript
    api = httpx.Client(base_url=real_server.base_url, headers={"authorization": f"Bearer {api_token}"})
    dictations = [m for m in api.get("/api/meetings").json()["meetings"] if m["kind"] == "dictation"]
    captions = [api.get(f"/api/meetings/{m['id']}/captions?format=text").text for m in dictations]
    assert any(TERM in text for text in captions), captions


async def test_finalize_flushes_what_was_sent_and_the_stream_goes_on(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    messages = await stream(real_server, api_token, np.concatenate([speech, speech]), finalize_at=55)
    flushed = [m for m in messages if m.type == "Results" and m.from_finalize]
    assert flushed and all(m.is_final and not m.speech_final for m in flushed)
    assert finals_text(messages).count("report") == 2, finals_text(messages)  # both sentences captioned


async def test_a_load_change_or_a_drain_sends_a_deepgram_client_nothing_it_cannot_parse(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    """The degradation ladder tells every live session the replica's load; a Deepgram client hears only
    Deepgram's message types (an SDK hands its caller ``None`` for anything else)."""
    url = real_server.base_url.replace("http", "ws") + "/v1/listen?encoding=linear16&sample_rate=16000"
    busy = {"rung": 2, "state": "fewer_partials", "message": "the server is busy"}
    async with connect(url, additional_headers={"Authorization": f"Token {api_token}"}) as ws:
        data = pcm(speech)
        for n, start in enumerate(range(0, len(data), FRAME_BYTES)):
            await ws.send(data[start : start + FRAME_BYTES])
            if n == 10:
                for session in list(real_server.services.hub.sessions.values()):
                    real_server.call_soon(functools.partial(session.tell_load, busy))
            await asyncio.sleep(0.1 / 1.4)
        await ws.send(json.dumps({"type": "CloseStream"}))
        kinds = [json.loads(m)["type"] async for m in ws]
    assert set(kinds) <= {"Results", "Metadata", "SpeechStarted", "UtteranceEnd"}, kinds
    assert "Results" in kinds and kinds[-1] == "Metadata"


async def test_a_browser_authenticates_with_the_token_subprotocol(
    real_server: LiveServer, api_token: str
) -> None:
    url = real_server.base_url.replace("http", "ws") + "/v1/listen?encoding=linear16&sample_rate=16000"
    async with connect(url, subprotocols=["token", api_token], origin=real_server.origin) as ws:
        assert ws.subprotocol == "token"
        await ws.send(bytes(8960))
        await ws.send(json.dumps({"type": "CloseStream"}))
        last = [json.loads(m) async for m in ws][-1]
    assert last["type"] == "Metadata"


@pytest.mark.parametrize(
    ("key", "params", "status"),
    [
        (None, {}, 401),
        ("wrong", {}, 401),
        ("good", {"encoding": "mulaw"}, 400),
        ("good", {"sample_rate": 8000}, 400),
        ("good", {"channels": 2}, 400),
        ("good", {"language": "fr"}, 400),
        ("good", {"interim_results": "maybe"}, 400),
        ("good", {"keyterm": [f"term{i}" for i in range(6)]}, 400),
        ("good", {"keyterm": ["bad\u0007term"]}, 400),
        ("good", {"keywords": ["word:9"]}, 400),
    ],
)
async def test_bad_handshakes_are_refused_with_a_status(
    real_server: LiveServer, api_token: str, key: str | None, params: dict[str, Any], status: int
) -> None:
    token = api_token if key == "good" else key or ""
    client = deepgram(real_server, token)
    if key is None:
        client = AsyncDeepgramClient(api_key="", environment=client._client_wrapper.get_environment())
    with pytest.raises(ApiError) as refused:
        async with client.listen.v1.connect(model="nova-3", **params):
            pass
    assert refused.value.status_code == status


async def until_closed(ws: Any) -> list[dict[str, Any]]:
    """The JSON messages a socket receives until it is closed (by either side, any code)."""
    replies = []
    try:
        async for message in ws:
            replies.append(json.loads(message))
    except ConnectionClosed:
        pass
    return replies


async def test_bad_messages_close_the_socket_and_the_server_keeps_serving(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    url = real_server.base_url.replace("http", "ws") + "/v1/listen"
    headers = {"Authorization": f"Token {api_token}"}
    async with connect(url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "Configure"}))
        replies = await until_closed(ws)
    assert replies[0]["type"] == "Error" and "Configure" in replies[0]["description"]
    assert ws.close_code == 1008
    async with connect(url, additional_headers=headers, max_size=None) as ws:
        await ws.send(bytes(70_000))
        await until_closed(ws)
    assert ws.close_code == 1009
    assert "report" in finals_text(await stream(real_server, api_token, speech))
