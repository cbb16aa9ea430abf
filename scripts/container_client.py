"""The client side of scripts/container_check.sh: one WAV over the WebSocket, then a drain on SIGTERM.

Speaks docs/protocol.md exactly as a browser would: log in as admin (cookie + CSRF header), create a meeting,
get a ticket, open ``/ws`` with the ``captions.v1`` and ``ticket.*`` subprotocols, ``start``, the WAV as PCM16
chunks in real time, ``stop``; then read the finals back over REST (``/api/meetings/{id}/captions``).

With ``--stop-command`` it then opens a second session, streams until the first message comes back, runs the
command (which sends SIGTERM to the server) and keeps streaming until the server closes: a clean drain sends
``{"type": "reconnect"}`` and closes with 1012. Prints one JSON object with everything it saw; exit 0 only if
every check passed.

    python scripts/container_client.py --base http://127.0.0.1:18000 --password-file PATH --wav speech.wav \
        [--stop-command "docker-compose ... kill -s SIGTERM app"]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
import wave
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

CHUNK_S = 1.12


def read_wav(path: Path) -> np.ndarray:
    """PCM16 mono 16 kHz samples of ``path`` (the only format the protocol takes)."""
    with wave.open(str(path), "rb") as wav:
        if (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) != (1, 2, 16000):
            raise SystemExit(f"{path}: need 16 kHz mono 16-bit PCM")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


def chunks(samples: np.ndarray, chunk_samples: int) -> list[bytes]:
    padded = np.concatenate([samples, np.zeros(-len(samples) % chunk_samples, "<i2")])
    return [padded[i : i + chunk_samples].tobytes() for i in range(0, len(padded), chunk_samples)]


def login(base: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30, trust_env=False)
    response = client.post("/api/auth/login", json={"username": "admin", "password": password})
    response.raise_for_status()
    client.headers["x-csrf-token"] = response.json()["csrf_token"]
    return client


async def open_session(base: str, api: httpx.Client, title: str) -> tuple[int, ClientConnection, dict]:
    response = api.post("/api/meetings", json={"title": title, "chunk_s": CHUNK_S})
    response.raise_for_status()
    meeting_id = int(response.json()["meeting"]["id"])
    response = api.post(f"/api/meetings/{meeting_id}/ticket")
    response.raise_for_status()
    ticket = response.json()["ticket"]
    ws = await connect(
        base.replace("http", "ws", 1) + "/ws",
        subprotocols=["captions.v1", f"ticket.{ticket}"],  # type: ignore[list-item]
        origin=base,  # type: ignore[arg-type]
        proxy=None,
    )
    await ws.send(json.dumps({"type": "start", "chunk_s": CHUNK_S}))
    ready = json.loads(await ws.recv())
    if ready.get("type") != "ready":
        raise RuntimeError(f"expected ready, got {ready}")
    return meeting_id, ws, ready


async def stream_wav(base: str, api: httpx.Client, samples: np.ndarray) -> dict[str, Any]:
    """One WAV in real time, then ``stop``; the finals as sent and as read back over REST."""
    meeting_id, ws, ready = await open_session(base, api, "container check")
    messages: list[dict] = []

    async def receive() -> None:
        try:
            async for raw in ws:
                messages.append(json.loads(raw))
        except ConnectionClosed:  # a close other than 1000/1001; ws.close_code tells which
            pass

    receiver = asyncio.create_task(receive())
    start = time.monotonic()
    for n, frame in enumerate(chunks(samples, ready["chunk_samples"])):
        await asyncio.sleep(max(0.0, start + n * CHUNK_S - time.monotonic()))
        await ws.send(frame)
    await ws.send(json.dumps({"type": "stop"}))
    await asyncio.wait_for(receiver, 120)
    finals = [m["text"] for m in messages if m["type"] == "final"]
    response = api.get(f"/api/meetings/{meeting_id}/captions")
    response.raise_for_status()
    stored = [c["text"] for c in response.json()["captions"]]
    return {
        "meeting_id": meeting_id,
        "close_code": ws.close_code,
        "partials": sum(m["type"] == "partial" for m in messages),
        "finals": finals,
        "stopped": any(m["type"] == "stopped" for m in messages),
        "rest_captions": stored,
        "audio_s": round(len(samples) / 16000, 2),
    }


async def drain(base: str, api: httpx.Client, samples: np.ndarray, stop_command: str) -> dict[str, Any]:
    """A live session while the server gets SIGTERM: it must say ``reconnect`` and close with 1012."""
    meeting_id, ws, ready = await open_session(base, api, "container check: drain")
    messages: list[dict] = []
    first = asyncio.Event()

    async def receive() -> None:
        try:
            async for raw in ws:
                messages.append(json.loads(raw))
                first.set()
        except ConnectionClosed:  # 1012 is not a "normal" close for websockets
            pass

    async def send() -> None:
        frames = chunks(samples, ready["chunk_samples"])
        start = time.monotonic()
        n = 0
        while True:  # the WAV over and over, in real time, until the server closes
            await asyncio.sleep(max(0.0, start + n * CHUNK_S - time.monotonic()))
            await ws.send(frames[n % len(frames)])
            n += 1

    receiver = asyncio.create_task(receive())
    sender = asyncio.create_task(send())
    await asyncio.wait_for(first.wait(), 60)
    stopped_at = time.monotonic()
    stopper = await asyncio.create_subprocess_exec(*shlex.split(stop_command))
    try:
        await asyncio.wait_for(receiver, 120)
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    closed_after_s = time.monotonic() - stopped_at
    stop_status = await asyncio.wait_for(stopper.wait(), 120)
    reconnect = [m for m in messages if m["type"] == "reconnect"]
    return {
        "meeting_id": meeting_id,
        "close_code": ws.close_code,
        "reconnect": reconnect[0] if reconnect else None,
        "finals": [m["text"] for m in messages if m["type"] == "final"],
        "closed_after_sigterm_s": round(closed_after_s, 2),
        "stop_command_status": stop_status,
    }


async def main_async(args: argparse.Namespace) -> int:
    password = Path(args.password_file).read_text().rstrip("\n")
    samples = read_wav(args.wav)
    api = login(args.base, password)
    result: dict[str, Any] = {"stream": await stream_wav(args.base, api, samples)}
    stream = result["stream"]
    checks = {
        "stream closed 1000 after stop": stream["close_code"] == 1000 and stream["stopped"],
        "at least one non-empty final": any(t.strip() for t in stream["finals"]),
        "finals read back over REST": stream["rest_captions"] == stream["finals"],
    }
    if args.stop_command:
        result["drain"] = await drain(args.base, api, samples, args.stop_command)
        checks["drain: reconnect message"] = result["drain"]["reconnect"] is not None
        checks["drain: closed 1012"] = result["drain"]["close_code"] == 1012
    result["checks"] = checks
    print(json.dumps(result, indent=1))
    return 0 if all(checks.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="http://host:port of the server")
    parser.add_argument("--password-file", required=True, help="the admin password (a secret file)")
    parser.add_argument("--wav", type=Path, required=True, help="16 kHz mono PCM16 speech")
    parser.add_argument("--stop-command", default=None, help="sends SIGTERM to the server (drain check)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
