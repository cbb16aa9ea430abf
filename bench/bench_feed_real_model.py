"""The meeting view across two real ``captions serve`` replicas (bundled model), one PostgreSQL (issue 40).

Starts a throwaway PostgreSQL, migrates it, runs ``captions serve`` twice (the CLI, as a deployment does,
each loading the model), speaks espeak-ng sentences in real time to replica A and watches the meeting on
replica B. Prints, as JSON, how long each partial and final took to reach the viewer on B after the
speaker's own socket on A got it (median, p95, max), and whether the viewer got every final.

    .venv/bin/python bench/bench_feed_real_model.py            # about 2 minutes on 2 cores
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402

from backend.db.migrate import upgrade  # noqa: E402
from bench.bench_feed_latency import summary  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.server import ADMIN_PASSWORD, free_port, login, wait_until_ready  # noqa: E402
from tests.support.speech import spoken  # noqa: E402

SENTENCES = [
    "The patient was seen on the ward this morning.",
    "Blood pressure is stable and the wound is healing well.",
    "We will review the medication again tomorrow.",
]
CHUNK_S = 0.56


async def run(urls: dict[str, str], audio: np.ndarray) -> dict[str, Any]:
    admin = login(urls["a"])
    meeting_id = admin.post("/api/meetings", json={"title": "Bench", "chunk_s": CHUNK_S}).json()["meeting"][
        "id"
    ]
    admin.post(f"/api/meetings/{meeting_id}/start")
    origin = urls["a"]
    view_ticket = admin.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]
    timeline: list[tuple[float, dict[str, Any]]] = []
    view = await connect(
        urls["b"].replace("http", "ws") + "/ws/view",
        subprotocols=["captions.view.v1", f"ticket.{view_ticket}"],
        origin=origin,
    )

    async def watch() -> None:
        async for raw in view:
            timeline.append((time.monotonic(), json.loads(raw)))

    watcher = asyncio.create_task(watch())
    ticket = admin.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]
    seen: dict[tuple[str, str], float] = {}
    finals = []
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    step = int(CHUNK_S * 16000) * 2
    async with connect(
        urls["a"].replace("http", "ws") + "/ws",
        subprotocols=["captions.v1", f"ticket.{ticket}"],
        origin=origin,
    ) as ws:
        await ws.send(json.dumps({"type": "start", "chunk_s": CHUNK_S}))
        session_id = json.loads(await ws.recv())["session_id"]

        async def read() -> None:
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] in ("partial", "final"):
                    seen.setdefault((message["type"], message["text"]), time.monotonic())
                if message["type"] == "final":
                    finals.append(message["text"])

        reader = asyncio.create_task(read())
        for offset in range(0, len(pcm) - step + 1, step):
            await ws.send(pcm[offset : offset + step])
            await asyncio.sleep(CHUNK_S)
        await ws.send(json.dumps({"type": "stop"}))
        await reader
    await asyncio.sleep(1.0)
    await view.close()
    watcher.cancel()
    first: dict[tuple[str, str], float] = {}
    for at, message in timeline:
        if message["type"] in ("partial", "final") and message["session_id"] == session_id:
            first.setdefault((message["type"], message["text"]), at)
    out: dict[str, list[float]] = {"partial": [], "final": []}
    for key, at in seen.items():
        if key in first:
            out[key[0]].append(first[key] - at)
    viewer_finals = [m["text"] for _t, m in timeline if m["type"] == "final"]
    return {
        "partial": summary(out["partial"]) if out["partial"] else None,
        "final": summary(out["final"]) if out["final"] else None,
        "speaker_finals": finals,
        "viewer_got_every_final": viewer_finals == finals,
    }


def main() -> None:
    cluster = PostgresCluster().start()
    servers: list[subprocess.Popen[bytes]] = []
    try:
        url = cluster.new_database()
        worker = threading.Thread(target=upgrade, args=("head", url))
        worker.start()
        worker.join()
        work = Path(tempfile.mkdtemp(prefix="feed-real-"))
        audio = np.concatenate([spoken(s, work) for s in SENTENCES])
        ports = {"a": free_port(), "b": free_port()}
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        started = time.monotonic()
        for name, port in ports.items():
            env = os.environ | {
                "CAPTIONS_PORT": str(port),
                "CAPTIONS_DATABASE_URL": url,
                "CAPTIONS_DATA_DIR": str(work / name),
                "CAPTIONS_CACHE_DIR": str(work / name / "cache"),
                "CAPTIONS_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "CAPTIONS_SECRET_KEY": "bench-secret-key-0123456789",
                "CAPTIONS_ALLOWED_ORIGINS": json.dumps([urls["a"]]),
                "CAPTIONS_FINAL_PASS": os.environ.get("CAPTIONS_FINAL_PASS", "off"),
                "CAPTIONS_LOG_LEVEL": "warning",
            }
            log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the server's life
            servers.append(
                subprocess.Popen(
                    [str(Path(sys.executable).parent / "captions"), "serve"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=log,
                )
            )
        for name, server in zip(ports, servers, strict=True):
            wait_until_ready(
                urls[name], 300, lambda s=server, n=name: None if s.poll() is None else sys.exit(f"{n} died")
            )
        ready_s = round(time.monotonic() - started, 1)
        result = asyncio.run(run(urls, audio))
        print(json.dumps({"replicas_ready_s": ready_s, "audio_s": round(len(audio) / 16000, 2), **result}))
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(60)
        cluster.stop()


if __name__ == "__main__":
    main()
