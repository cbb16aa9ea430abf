"""End to end on the bundled model: ``make run`` serves; a scripted client streams a WAV of speech and gets
finals equal to the engine's own offline decode of that audio, persisted in the database."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from websockets.asyncio.client import connect

from backend.app import build_engine
from backend.config import REPO_ROOT, Settings
from backend.engine import StreamOptions
from tests.support.server import ADMIN_PASSWORD, free_port, login, query, wait_until_ready
from tests.support.speech import spoken

pytestmark = pytest.mark.slow
CHUNK_SIZES = (1.12, 0.56)
SENTENCE = "The weather is quite pleasant today, and the children are playing in the garden."


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """A sentence spoken by espeak-ng, 16 kHz mono float32, padded with silence."""
    return spoken(SENTENCE, tmp_path_factory.mktemp("wav"))


def chunks(audio: np.ndarray, chunk_samples: int) -> list[bytes]:
    padded = np.concatenate([audio, np.zeros(-len(audio) % chunk_samples, np.float32)])
    pcm = (np.clip(padded, -1, 1) * 32767).astype("<i2")
    return [pcm[i : i + chunk_samples].tobytes() for i in range(0, len(pcm), chunk_samples)]


@pytest.fixture(scope="module")
def offline_finals(speech: np.ndarray) -> dict[float, list[str]]:
    """The engine's decode of the same audio at each chunk size, one stream, no server in between (the
    default decoding: beam search with the bundled LM); one engine for both sizes."""

    async def decode() -> dict[float, list[str]]:
        engine = build_engine(Settings())  # the configuration `make run` uses
        await engine.start()
        try:
            decoded = {}
            for chunk_s in CHUNK_SIZES:
                options = StreamOptions(chunk_s=chunk_s, decoding=Settings().default_decoding)
                stream = engine.open_stream(options)
                texts = []
                for frame in chunks(speech, engine.chunk_samples(chunk_s)):
                    texts += [f.text for f in (await stream.push(frame)).finals]
                texts += [f.text for f in (await stream.finish()).finals]
                decoded[chunk_s] = [t for t in texts if t.strip()]
            return decoded
        finally:
            await engine.stop()

    result: list[dict[float, list[str]]] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(decode())))
    worker.start()
    worker.join()
    return result[0]


@pytest.fixture(scope="module")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``make run`` exactly as a user types it, on a free port and a temp SQLite file."""
    tmp = tmp_path_factory.mktemp("run")
    port = free_port()
    database_url = f"sqlite+aiosqlite:///{tmp / 'captions.db'}"
    env = os.environ | {
        "CAPTIONS_PORT": str(port),
        "CAPTIONS_DATABASE_URL": database_url,
        "CAPTIONS_DATA_DIR": str(tmp / "data"),
        "CAPTIONS_CACHE_DIR": str(tmp / "cache"),
        "CAPTIONS_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "CAPTIONS_ALLOWED_ORIGINS": json.dumps([f"http://127.0.0.1:{port}"]),
    }
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        ["make", "run"], cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        def alive() -> None:
            assert process.poll() is None, (tmp / "server.log").read_text()[-3000:]

        try:
            wait_until_ready(base, 300, alive)
        except TimeoutError:
            pytest.fail("make run did not become ready in 300 s")
        yield base, database_url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        log.close()


async def stream_wav(base: str, audio: np.ndarray, chunk_s: float) -> list[dict]:
    api = login(base)
    meeting = api.post("/api/meetings", json={"title": "E2E", "chunk_s": chunk_s}).json()["meeting"]
    ticket = api.post(f"/api/meetings/{meeting['id']}/ticket").json()["ticket"]
    ws = await connect(
        base.replace("http", "ws") + "/ws", subprotocols=["captions.v1", f"ticket.{ticket}"], origin=base
    )
    await ws.send(json.dumps({"type": "start", "chunk_s": chunk_s}))
    ready = json.loads(await ws.recv())
    messages = []

    async def receive() -> None:
        async for raw in ws:
            messages.append(json.loads(raw))

    receiver = asyncio.create_task(receive())
    start = time.monotonic()
    for n, frame in enumerate(chunks(audio, ready["chunk_samples"])):
        await asyncio.sleep(max(0.0, start + n * chunk_s - time.monotonic()))  # real time, like a browser
        await ws.send(frame)
    await ws.send(json.dumps({"type": "stop"}))
    await asyncio.wait_for(receiver, 120)
    assert ws.close_code == 1000
    return messages


@pytest.mark.parametrize("chunk_s", CHUNK_SIZES)
async def test_make_run_captions_speech_like_the_offline_decode(
    make_run: tuple[str, str], speech: np.ndarray, offline_finals: dict[float, list[str]], chunk_s: float
) -> None:
    base, database_url = make_run
    messages = await stream_wav(base, speech, chunk_s)
    finals = [m["text"] for m in messages if m["type"] == "final"]
    expected = offline_finals[chunk_s]
    assert " ".join(finals) == " ".join(expected)
    assert any(m["type"] == "partial" for m in messages)
    words = " ".join(finals).lower()
    assert sum(w in words for w in ("weather", "children", "playing", "garden")) >= 2, words
    stored = query(database_url, "SELECT text FROM caption_segments ORDER BY id")
    assert [t for (t,) in stored][-len(finals) :] == finals
    print(f"{chunk_s} s chunks: {finals}", file=sys.stderr)
