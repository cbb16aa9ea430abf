"""How long a partial or final takes to reach a meeting viewer on ANOTHER replica (issue 40): PostgreSQL's
LISTEN/NOTIFY bus (backend/meeting_view/bus.py) between two replica processes on one host.

Two replicas (forked from one import, the fake decoder: the bus's latency does not depend on the model) share
a throwaway PostgreSQL; speakers stream on replica A, a viewer watches on replica B. For every partial and
final the script takes the time the speaker's own socket got it and the time the viewer got it, and prints
the differences (median, p95, max) as JSON.

    .venv/bin/python bench/bench_feed_latency.py --speakers 4 --chunks 150
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402

from backend.db.migrate import upgrade  # noqa: E402
from tests.support.fake_engine import chunk  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.replica_fork import REPLICAS_ENV  # noqa: E402
from tests.support.server import free_port, login, make_settings, wait_until_ready  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, Any]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p95_ms": round(percentile(ms, 0.95), 2),
        "max_ms": round(max(ms), 2),
    }


async def speak(ws_url: str, origin: str, ticket: str, word: int, chunks: int, pace_s: float) -> dict:
    seen: dict[tuple[str, str], float] = {}
    async with connect(ws_url, subprotocols=["captions.v1", f"ticket.{ticket}"], origin=origin) as ws:
        await ws.send(json.dumps({"type": "start", "chunk_s": 0.56}))
        session_id = json.loads(await ws.recv())["session_id"]

        async def read() -> None:
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] in ("partial", "final"):
                    seen.setdefault((message["type"], message["text"]), time.monotonic())

        reader = asyncio.create_task(read())
        for index in range(chunks):
            await ws.send(chunk(0 if index % 4 == 3 else word + index))
            await asyncio.sleep(pace_s)
        await ws.send(json.dumps({"type": "stop"}))
        await reader
    return {"session_id": session_id, "seen": seen}


async def run(args: argparse.Namespace, urls: dict[str, str], admin: Any) -> dict[str, Any]:
    meeting_id = admin.post("/api/meetings", json={"title": "Bench", "chunk_s": 0.56}).json()["meeting"]["id"]
    admin.post(f"/api/meetings/{meeting_id}/start")
    b = urls["b"].replace("http", "ws")
    view_ticket = admin.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]
    timeline: list[tuple[float, dict[str, Any]]] = []
    view = await connect(
        f"{b}/ws/view", subprotocols=["captions.view.v1", f"ticket.{view_ticket}"], origin=urls["origin"]
    )

    async def watch() -> None:
        async for raw in view:
            timeline.append((time.monotonic(), json.loads(raw)))

    watcher = asyncio.create_task(watch())
    tickets = [
        admin.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"] for _ in range(args.speakers)
    ]
    a = urls["a"].replace("http", "ws")
    spoken = await asyncio.gather(
        *(
            speak(f"{a}/ws", urls["origin"], t, 1000 * (n + 1), args.chunks, args.pace_s)
            for n, t in enumerate(tickets)
        )
    )
    await asyncio.sleep(1.0)
    await view.close()
    watcher.cancel()
    first: dict[tuple[str, str, str], float] = {}
    for at, message in timeline:
        if message["type"] in ("partial", "final"):
            first.setdefault((message["type"], message["session_id"], message["text"]), at)
    out: dict[str, list[float]] = {"partial": [], "final": []}
    missing = 0
    for speaker in spoken:
        for (kind, text), at in speaker["seen"].items():
            viewer_at = first.get((kind, speaker["session_id"], text))
            if viewer_at is None:
                missing += kind == "final"
            else:
                out[kind].append(viewer_at - at)
    return {"partial": summary(out["partial"]), "final": summary(out["final"]), "finals_missing": missing}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--speakers", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=150)
    parser.add_argument("--pace-s", type=float, default=0.14, help="between two chunks of a speaker")
    args = parser.parse_args()
    cluster = PostgresCluster().start()
    forks = None
    try:
        url = cluster.new_database()
        worker = threading.Thread(target=upgrade, args=("head", url))
        worker.start()
        worker.join()
        tmp = Path(cluster.root)
        ports = {"a": free_port(), "b": free_port()}
        origin = f"http://127.0.0.1:{ports['a']}"
        settings = [
            make_settings(
                tmp / name,
                port=port,
                database_url=url,
                allowed_origins=[origin],
                audio_burst_s=600.0,
                max_sessions_per_user=args.speakers,
            )
            for name, port in ports.items()
        ]
        forks = subprocess.Popen(
            [sys.executable, "-m", "tests.support.replica_fork"],
            cwd=ROOT,
            env=os.environ | {REPLICAS_ENV: json.dumps([s.model_dump_json() for s in settings])},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert forks.stdout is not None
        json.loads(forks.stdout.readline())
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()} | {"origin": origin}
        for name in ports:
            wait_until_ready(urls[name], 180, lambda: None)
        result = asyncio.run(run(args, urls, login(urls["a"])))
        print(json.dumps({"speakers": args.speakers, "chunks": args.chunks, **result}))
    finally:
        if forks is not None:
            forks.terminate()
            forks.wait(10)
        cluster.stop()


if __name__ == "__main__":
    main()
