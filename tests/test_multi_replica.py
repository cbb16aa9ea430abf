"""Three replicas behind nginx on one PostgreSQL, as a cluster runs them (issue 40): two speakers on
different replicas and a viewer on the third see one live timeline with partials (pushed over PostgreSQL's
LISTEN/NOTIFY, ``backend.meeting_view.bus``); kill -9 of one speaker's replica mid-sentence: its client
resumes through nginx on another replica and no final is lost or doubled; SIGTERM of the other's: its session
drains and resumes elsewhere.

Each replica is a real process serving as ``captions serve`` does (``DrainingServer`` and ``server_config``,
forked from one import by ``tests.support.replica_fork``) on the fake decoder: what is under test is
routing, the cross-replica feed, resume and drain, none of which depends on the model. nginx (Debian's)
routes each client to its replica by a header, with the other two as backups, so a dead or draining
replica's clients land on another one exactly as ``proxy_next_upstream`` makes them in
deploy/nginx/nginx.conf.

The latency of a partial or final from the speaker's own socket to the viewer on another replica is printed
(``-s``) as median and p95: docs/deploy.md "Kubernetes" quotes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from backend.config import Settings
from backend.db.migrate import upgrade
from tests.support.fake_engine import chunk
from tests.support.postgres import PostgresCluster
from tests.support.replica_fork import REPLICAS_ENV
from tests.support.server import free_port, login, make_settings, query, wait_until_ready

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CHUNK_S = 0.56
PACE_S = 0.12
"""Between two chunks a speaker sends (faster than real time; the replicas allow the burst)."""
SPEAKER_1 = [101, 102, 0, 103, 104, 105, 0, 106, 107, 0]
SPEAKER_2 = [201, 0, 202, 203, 0, 204, 205, 0, 206, 207, 0, 208, 209, 0]
SPEAKER_2_PACE_S = 0.25
"""Speaker 2 talks slower: still mid-sentence when its replica is stopped after speaker 1 has resumed."""
KILL_AFTER = "word103 word104"
"""Replica A is killed once speaker 1 has this partial: mid-sentence, nothing of it stored."""
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
ROOT = Path(__file__).resolve().parents[1]


def sentences(script: list[int]) -> list[str]:
    out, words = [], []
    for sample in script:
        if sample == 0:
            out.append(" ".join(words))
            words = []
        else:
            words.append(f"word{sample}")
    return out


class Nginx:
    """nginx on a free port: header ``x-replica: a|b|c`` picks the primary, the other two are backups."""

    def __init__(self, root: Path, ports: dict[str, int]) -> None:
        self.root = root
        self.port = free_port()
        pools = []
        for name in ports:
            servers = [f"server 127.0.0.1:{ports[name]} max_fails=0;"] + [
                f"server 127.0.0.1:{ports[other]} backup max_fails=0;" for other in ports if other != name
            ]
            pools.append(f"upstream pool_{name} {{ {' '.join(servers)} }}")
        temp = " ".join(f"{kind}_temp_path {root}/{kind};" for kind in ("proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;" if os.geteuid() == 0 else ""
        (root / "nginx.conf").write_text(
            f"""{user}
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    {temp}
    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    map $http_x_replica $pool {{ default pool_a; b pool_b; c pool_c; }}
    {" ".join(pools)}
    server {{
        listen 127.0.0.1:{self.port};
        proxy_http_version 1.1;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $connection_upgrade;
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $remote_addr;
        proxy_read_timeout 3600s;
        proxy_send_timeout 3600s;
        proxy_connect_timeout 2s;
        proxy_next_upstream error timeout http_502 http_503;
        proxy_next_upstream_tries 3;
        location / {{ proxy_pass http://$pool; }}
    }}
}}
"""
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Nginx:
        self.process = subprocess.Popen([NGINX, "-c", str(self.root / "nginx.conf"), "-p", str(self.root)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise TimeoutError("nginx did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


class Replica:
    """One forked replica (``tests.support.replica_fork``), by its process id."""

    def __init__(self, settings: Settings, pid: int) -> None:
        self.settings = settings
        self.pid = pid
        self.base_url = f"http://127.0.0.1:{settings.port}"

    def alive(self) -> bool:
        try:
            return Path(f"/proc/{self.pid}/stat").read_text().split()[2] != "Z"
        except FileNotFoundError:
            return False

    def check_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(f"replica {self.base_url} exited")

    def kill(self) -> None:
        """kill -9: no drain, whatever was in memory is gone."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, as Kubernetes stops a pod: drain, then exit."""
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while self.alive():
            if time.monotonic() > deadline:
                raise TimeoutError("the replica did not stop")
            time.sleep(0.05)


@pytest.fixture
def cluster(tmp_path: Path, postgres: PostgresCluster) -> Iterator[tuple[dict[str, Replica], Nginx]]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is missing: make system-deps installs Debian's nginx-light")
    url = postgres.new_database()
    worker = threading.Thread(target=upgrade, args=("head", url))
    worker.start()
    worker.join()
    ports = {name: free_port() for name in "abc"}
    proxy = Nginx(tmp_path, ports)
    origin = f"http://127.0.0.1:{proxy.port}"
    settings = {
        name: make_settings(
            tmp_path / name,
            port=port,
            database_url=url,
            allowed_origins=[origin],
            trusted_proxies="127.0.0.1",
            audio_burst_s=60.0,
            drain_timeout_s=10.0,
        )
        for name, port in ports.items()
    }
    forks = subprocess.Popen(
        [sys.executable, "-m", "tests.support.replica_fork"],
        cwd=ROOT,
        env=os.environ | {REPLICAS_ENV: json.dumps([s.model_dump_json() for s in settings.values()])},
        stdout=subprocess.PIPE,
        text=True,
    )
    replicas: dict[str, Replica] = {}
    try:
        assert forks.stdout is not None
        pids = json.loads(forks.stdout.readline() or '{"pids": []}')["pids"]
        replicas = {name: Replica(settings[name], pid) for name, pid in zip(settings, pids, strict=True)}
        for replica in replicas.values():
            wait_until_ready(replica.base_url, 120, replica.check_alive)
        yield replicas, proxy.start()
    finally:
        proxy.stop()
        for replica in replicas.values():
            replica.kill()
        forks.wait(10)


@dataclass
class Speaker:
    """A client that streams its script through nginx to its replica and, whenever the connection ends
    early (1012 drain, a dead replica), resumes as docs/protocol.md "Resuming" says: new ticket, the resume
    token, ``last_seq``, and its audio again from ``resume_from_s``."""

    api: httpx.Client
    meeting_id: int
    replica: str
    script: list[int]
    origin: str
    ws_url: str
    session_id: str = ""
    resume_token: str = ""
    last_seq: int = 0
    finals: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[tuple[str, str], float] = field(default_factory=dict)
    connections: int = 0
    closes: list[int | None] = field(default_factory=list)
    partial_event: asyncio.Event = field(default_factory=asyncio.Event)
    partials: list[str] = field(default_factory=list)
    pace_s: float = PACE_S

    async def open(self) -> ClientConnection:
        ticket = self.api.post(f"/api/meetings/{self.meeting_id}/ticket").json()["ticket"]
        return await connect(
            self.ws_url,
            subprotocols=["captions.v1", f"ticket.{ticket}"],
            origin=self.origin,
            additional_headers={"x-replica": self.replica},
            compression=None,
        )

    async def run(self) -> None:
        sent = 0  # chunks of the script captured so far (sent or not)
        while True:
            try:
                ws = await self.open()
            except (InvalidStatus, OSError):
                await asyncio.sleep(0.2)  # every replica refused for now
                continue
            self.connections += 1
            start: dict[str, Any] = {"type": "start", "chunk_s": CHUNK_S}
            if self.resume_token:
                start |= {
                    "resume_token": self.resume_token,
                    "last_seq": self.last_seq,
                    "audio_s": round(sent * CHUNK_S, 3),
                    "buffered_from_s": 0.0,
                }
            await ws.send(json.dumps(start))
            ready = json.loads(await ws.recv())
            if ready["type"] != "ready":  # resume_conflict while the old connection lets go: retry
                await asyncio.sleep(0.3)
                continue
            self.session_id, self.resume_token = ready["session_id"], ready["resume_token"]
            position = round(ready["resume_from_s"] / CHUNK_S)
            reader = asyncio.create_task(self.read(ws))
            try:
                for index in range(position, len(self.script)):
                    await ws.send(chunk(self.script[index]))
                    sent = max(sent, index + 1)
                    await asyncio.sleep(self.pace_s)
                await ws.send(json.dumps({"type": "stop"}))
            except ConnectionClosed:
                pass
            await reader
            self.closes.append(ws.close_code)
            if ws.close_code == 1000:
                return

    async def read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                message = json.loads(raw)
                now = time.monotonic()
                if message["type"] == "partial":
                    self.seen.setdefault(("partial", message["text"]), now)
                    self.partials.append(message["text"])
                    self.partial_event.set()
                elif message["type"] == "final":
                    self.seen.setdefault(("final", message["text"]), now)
                    if message["seq"] > self.last_seq:
                        self.finals.append(message)
                        self.last_seq = message["seq"]
        except ConnectionClosed:
            pass


async def watch(ws: ClientConnection, timeline: list[tuple[float, dict[str, Any]]]) -> None:
    try:
        async for raw in ws:
            timeline.append((time.monotonic(), json.loads(raw)))
    except ConnectionClosed:
        pass


def latencies(
    kind: str, speakers: list[Speaker], timeline: list[tuple[float, dict[str, Any]]]
) -> list[float]:
    """Seconds from the speaker's own socket to the viewer's, per partial or final text (first seen)."""
    first: dict[tuple[str, str], float] = {}
    for at, message in timeline:
        if message["type"] == kind:
            first.setdefault((message["session_id"], message["text"]), at)
    out = []
    for speaker in speakers:
        for (seen_kind, text), at in speaker.seen.items():
            viewer_at = first.get((speaker.session_id, text))
            if seen_kind == kind and viewer_at is not None:
                out.append(viewer_at - at)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


async def test_three_replicas_one_live_timeline_through_a_crash_and_a_drain(
    cluster: tuple[dict[str, Replica], Nginx],
) -> None:
    replicas, proxy = cluster
    base = f"http://127.0.0.1:{proxy.port}"
    admin = login(base)
    created = admin.post("/api/users", json={"username": "nurse", "password": "long enough pw"})
    assert created.status_code == 201, created.text
    nurse = login(base, "nurse", "long enough pw")
    meeting_id = admin.post("/api/meetings", json={"title": "Ward round", "chunk_s": CHUNK_S}).json()[
        "meeting"
    ]["id"]
    assert admin.post(f"/api/meetings/{meeting_id}/start").status_code == 200
    invited = admin.post(f"/api/meetings/{meeting_id}/members", json={"username": "nurse"})
    assert invited.status_code == 201, invited.text  # meetings are private: the nurse is invited

    ws_url = f"ws://127.0.0.1:{proxy.port}/ws"
    view_ticket = admin.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]
    view = await connect(
        f"{ws_url}/view",
        subprotocols=["captions.view.v1", f"ticket.{view_ticket}"],
        origin=base,
        additional_headers={"x-replica": "c"},
        compression=None,
    )
    timeline: list[tuple[float, dict[str, Any]]] = []
    viewer = asyncio.create_task(watch(view, timeline))
    one = Speaker(admin, meeting_id, "a", SPEAKER_1, base, ws_url)
    two = Speaker(nurse, meeting_id, "b", SPEAKER_2, base, ws_url, pace_s=SPEAKER_2_PACE_S)
    tasks = [asyncio.create_task(s.run()) for s in (one, two)]

    async with asyncio.timeout(10):
        while KILL_AFTER not in one.partials:
            await one.partial_event.wait()
            one.partial_event.clear()
    replicas["a"].kill()  # mid-sentence: "word103 word104" was never stored
    async with asyncio.timeout(10):
        while len(one.finals) < 2:  # speaker 1 resumed elsewhere and finished that sentence
            await asyncio.sleep(0.02)
        two.partial_event.clear()
        await two.partial_event.wait()  # speaker 2 is mid-sentence
    drained = asyncio.get_running_loop().run_in_executor(None, replicas["b"].stop)  # SIGTERM: drain
    async with asyncio.timeout(40):
        await asyncio.gather(*tasks)
        await drained
    assert admin.post(f"/api/meetings/{meeting_id}/end").status_code == 200
    async with asyncio.timeout(10):
        await viewer

    # The speakers: every word once, in order, numbered without a gap, across the crash and the drain (a
    # drain flushes the sentence being spoken as a final, so the drained speaker's may be split in two).
    for speaker in (one, two):
        assert " ".join(f["text"] for f in speaker.finals) == " ".join(sentences(speaker.script))
    assert [f["text"] for f in one.finals][:2] == sentences(SPEAKER_1)[:2]  # "word103 word104" whole
    for speaker in (one, two):
        assert [f["seq"] for f in speaker.finals] == list(range(1, len(speaker.finals) + 1))
        assert speaker.connections >= 2
    assert 1012 in two.closes  # drained, told to reconnect
    assert one.closes[0] not in (1000, 1012)  # the replica vanished

    # The viewer on the third replica: one timeline, each final once, partials from both speakers.
    messages = [m for _t, m in timeline]
    assert messages[0]["type"] == "ready" and messages[-1]["type"] == "ended"
    shown = [(m["session_id"], m["seq"], m["text"]) for m in messages if m["type"] == "final"]
    assert len(shown) == len(set(shown)), "a final was shown twice"
    for speaker in (one, two):
        mine = [text for sid, _seq, text in shown if sid == speaker.session_id]
        assert mine == [f["text"] for f in speaker.finals]
        assert {
            m["text"] for m in messages if m["type"] == "partial" and m["session_id"] == speaker.session_id
        }
    stored = query(
        replicas["c"].settings.database_url, "SELECT session_id, seq, text FROM caption_segments ORDER BY id"
    )
    assert sorted(stored) == sorted(shown)

    partial_s, final_s = latencies("partial", [one, two], timeline), latencies("final", [one, two], timeline)
    print(
        "\nviewer on another replica, seconds after the speaker's own socket: "
        f"partials n={len(partial_s)} median={statistics.median(partial_s):.4f} p95={p95(partial_s):.4f}; "
        f"finals n={len(final_s)} median={statistics.median(final_s):.4f} p95={p95(final_s):.4f}"
    )
    assert statistics.median(partial_s) < 0.3 and statistics.median(final_s) < 0.3
