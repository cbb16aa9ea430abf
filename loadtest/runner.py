"""Runs the ramp: provisions accounts and meetings, then for each step N starts N streaming clients, samples
the server while they stream, checks their finals against what the server persisted and summarises.

Bounded: at most ``MAX_CLIENTS`` clients, each step lasts ``step_seconds`` (+ the time to stop), the whole run
stops at ``max_total_s``; by default the ramp ends after the first step that is not real time.

Fault mode (``kill_at_s``, with a ``restart`` callback from ``--start-server``): the server is killed with
SIGKILL that many seconds into each step and started again on the same database; every client resumes as
the page does (sending its held audio again) and the step still checks that no final was lost, received
twice or decoded twice.
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from loadtest.api import Fleet, FleetPlan, is_ready, open_fleet, scrape_metrics
from loadtest.audio import SAMPLE_RATE_HZ, AudioLoop, load_pcm16, load_transcript, synthesize
from loadtest.client import ClientPlan, StreamingClient
from loadtest.report import SESSIONS, Criteria, Sample, capacity, summarize_step

MAX_CLIENTS = 512
START_LEAD_S = 1.0  # between planning a step and its first client connecting


@dataclass(frozen=True)
class LoadTestConfig:
    """One run. ``steps``: client counts in order; ``clients_per_meeting``/``clients_per_user``: how clients
    share meetings and accounts (keep ``clients_per_user`` <= the server's per-user session cap)."""

    base_url: str
    admin_password: str
    steps: tuple[int, ...] = (1, 8, 16, 32, 64)
    step_seconds: float = 30.0
    ramp_seconds: float = 5.0
    chunk_s: float = 1.12
    decoding: str = "greedy"
    terms: int = 200
    clients_per_meeting: int = 1
    clients_per_user: int = 4
    reconnect_fraction: float = 0.0
    reconnect_delay_s: float = 0.5
    stop_timeout_s: float = 30.0
    criteria: Criteria = field(default_factory=Criteria)
    wav: Path | None = None
    origin: str | None = None
    server_pid: int | None = None
    sample_interval_s: float = 1.0
    max_total_s: float = 900.0
    continue_past_capacity: bool = False
    label: str = ""
    progress: bool = True
    kill_at_s: float | None = None
    fault_grace_s: float = 600.0

    def __post_init__(self) -> None:
        if not self.steps or min(self.steps) < 1 or max(self.steps) > MAX_CLIENTS:
            raise ValueError(f"steps must be client counts between 1 and {MAX_CLIENTS}")
        if not 0.0 <= self.reconnect_fraction <= 1.0:
            raise ValueError("reconnect_fraction must be between 0 and 1")
        if (
            self.step_seconds < 2 * self.chunk_s
            or self.ramp_seconds < 0
            or self.ramp_seconds >= self.step_seconds
        ):
            raise ValueError("need step_seconds >= 2 chunks and 0 <= ramp_seconds < step_seconds")
        if self.clients_per_meeting < 1 or self.clients_per_user < 1:
            raise ValueError("clients_per_meeting and clients_per_user must be >= 1")
        if not 0 <= self.terms <= 20000:
            raise ValueError("terms must be between 0 and 20000")
        if self.kill_at_s is not None and not 0 < self.kill_at_s < self.step_seconds:
            raise ValueError("kill_at_s must fall inside a step (0 < kill_at_s < step_seconds)")


class ProcessSampler:
    """CPU % (of one core; 200 = two cores busy) and RSS of a process, from /proc (None when unknown)."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._ticks_per_s = os.sysconf("SC_CLK_TCK")
        self._last: tuple[float, float] | None = None

    def sample(self) -> tuple[float | None, float | None]:
        if self.pid is None:
            return None, None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None, None
        cpu_s = (int(fields[11]) + int(fields[12])) / self._ticks_per_s  # utime + stime
        rss_kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        now, last, self._last = time.monotonic(), self._last, (time.monotonic(), cpu_s)
        cpu_pct = None if last is None else 100.0 * (cpu_s - last[1]) / max(1e-6, now - last[0])
        return (None if cpu_pct is None else round(cpu_pct, 1)), round(rss_kb / 1024, 1)


class _Step:
    """One step's clients and samples."""

    def __init__(self, run: _Run, n: int) -> None:
        self.run, self.n = run, n
        self.started_at = time.monotonic() + START_LEAD_S
        self.samples: list[Sample] = []
        self.clients = [
            StreamingClient(
                plan,
                run.audio,
                self._tickets_for(plan.index),
                run.ws_url,
                run.origin,
                run.config.reconnect_delay_s,
                run.config.stop_timeout_s,
            )
            for plan in self._plans()
        ]

    def _plans(self) -> list[ClientPlan]:
        config, n = self.run.config, self.n
        stop_at = self.started_at + config.step_seconds
        droppers = _spread(round(config.reconnect_fraction * n), n)
        plans = []
        for index in range(n):
            start_at = self.started_at + config.ramp_seconds * index / n
            plans.append(
                ClientPlan(
                    index=index,
                    meeting_id=self.run.fleet.meeting_ids[index // config.clients_per_meeting],
                    chunk_s=config.chunk_s,
                    start_at=start_at,
                    stop_at=stop_at,
                    first_chunk=(index * 7) % self.run.audio.chunks_per_loop,
                    drop_at=(start_at + stop_at) / 2 if index in droppers else None,
                    resume_on_loss=config.kill_at_s is not None,
                    fault_grace_s=config.fault_grace_s,
                )
            )
        return plans

    def _tickets_for(self, index: int) -> Callable[[int], Any]:
        user = index // self.run.config.clients_per_user
        return lambda meeting_id: self.run.fleet.ticket(user, meeting_id)

    async def execute(self) -> dict[str, Any]:
        config = self.run.config
        await self._sample()
        sampler = asyncio.create_task(self._sample_forever())
        progress = asyncio.create_task(self._progress())
        tasks = [asyncio.create_task(c.run()) for c in self.clients]
        fault = asyncio.create_task(self._fault()) if config.kill_at_s is not None else None
        grace_s = config.fault_grace_s if fault is not None else 0.0
        _, pending = await asyncio.wait(
            tasks, timeout=START_LEAD_S + config.step_seconds + config.stop_timeout_s + 30 + grace_s
        )
        fault_figures = await fault if fault is not None else {}
        for task in pending:
            task.cancel()
        sampler.cancel()
        progress.cancel()
        await asyncio.gather(sampler, progress, *pending, return_exceptions=True)
        await self._sample()
        for client, task in zip(self.clients, tasks, strict=True):
            if task in pending:
                client.result.errors.append("client_timeout")
        results = [c.result for c in self.clients]
        persisted = await self.run.fleet.persisted_finals({c.meeting_id for c in results})
        steady_s = (config.ramp_seconds, config.step_seconds)
        step = summarize_step(
            self.n,
            config.chunk_s,
            results,
            self.samples,
            persisted,
            self.started_at,
            config.criteria,
            steady_s,
        )
        return step | fault_figures | {"host_loadavg_1m": round(os.getloadavg()[0], 2)}  # a shared machine

    async def _fault(self) -> dict[str, Any]:
        """Kill the server ``kill_at_s`` into the step and start it again; when, and how long it was down."""
        run = self.run
        if run.restart is None or run.config.kill_at_s is None:
            raise RuntimeError("fault mode needs a server this run started")
        await asyncio.sleep(max(0.0, self.started_at + run.config.kill_at_s - time.monotonic()))
        killed = time.monotonic()
        run.process.pid = await asyncio.to_thread(run.restart)
        return {
            "killed_at_s": round(killed - self.started_at, 2),
            "down_s": round(time.monotonic() - killed, 2),
        }

    async def _sample(self) -> None:
        run = self.run
        try:
            metrics = await scrape_metrics(run.http)
            ready: bool | None = await is_ready(run.http)
        except httpx.HTTPError:
            metrics, ready = {}, None
        cpu_pct, rss_mb = run.process.sample()
        self.samples.append(
            Sample(round(time.monotonic() - self.started_at, 2), metrics, ready, cpu_pct, rss_mb)
        )

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(self.run.config.sample_interval_s)
            await self._sample()

    async def _progress(self) -> None:
        config = self.run.config
        bar = tqdm(
            total=round(config.step_seconds),
            desc=f"{config.label} N={self.n}",
            unit="s",
            disable=not config.progress,
            leave=True,
            dynamic_ncols=True,
        )
        try:
            while True:
                await asyncio.sleep(1.0)
                elapsed = min(config.step_seconds, time.monotonic() - self.started_at)
                bar.update(max(0, round(elapsed) - bar.n))
                bar.set_postfix_str(self._status(), refresh=True)
        finally:
            bar.close()

    def _status(self) -> str:
        results = [c.result for c in self.clients]
        finals = sorted(x for r in results for x in r.final_latency_ms[-20:])
        last = self.samples[-1] if self.samples else None
        metrics = last.metrics if last else {}
        cpu = "-" if last is None or last.cpu_pct is None else f"{last.cpu_pct:.0f}"
        return (
            f"live={int(metrics.get(SESSIONS, 0))} 503={sum(r.handshake_status == 503 for r in results)} "
            f"1013={sum(r.busy_at is not None for r in results)} "
            f"final~{finals[len(finals) // 2] if finals else 0:.0f}ms "
            f"lag={metrics.get('captions_max_lag_seconds', 0):.2f}s "
            f"batch={metrics.get('captions_engine_batch_streams', 0):.0f} "
            f"step={metrics.get('captions_engine_step_ms', 0):.0f}ms cpu={cpu}%"
        )


def _spread(count: int, n: int) -> set[int]:
    """``count`` client indices spread evenly over ``range(n)``."""
    return {math.floor(i * n / count) for i in range(count)} if count else set()


class _Run:
    def __init__(
        self,
        config: LoadTestConfig,
        audio: AudioLoop,
        fleet: Fleet,
        http: httpx.AsyncClient,
        restart: Callable[[], int] | None = None,
    ) -> None:
        self.config, self.audio, self.fleet, self.http = config, audio, fleet, http
        self.restart = restart  # fault mode: kill -9 the server, start it again, return its new pid
        self.process = ProcessSampler(config.server_pid)
        self.ws_url = config.base_url.replace("http", "ws", 1).rstrip("/") + "/ws"
        self.origin = config.origin or config.base_url.rstrip("/")

    async def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until the server has no live session left (the previous step's clean-up); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (await scrape_metrics(self.http)).get(SESSIONS, 0.0) == 0:
                return True
            await asyncio.sleep(0.5)
        return False


async def _prepare_step(run: _Run, n: int, began: float, notes: list[str]) -> bool:
    """Accounts and meetings for N clients, and an idle server; False when the time budget is spent."""
    config = run.config
    if time.monotonic() - began + config.step_seconds + START_LEAD_S + 5 > config.max_total_s:
        notes.append(f"stopped before N={n}: time budget of {config.max_total_s:.0f} s")
        return False
    setup_began = time.monotonic()
    await run.fleet.grow(
        meetings=math.ceil(n / config.clients_per_meeting), users=math.ceil(n / config.clients_per_user)
    )
    notes.append(
        f"N={n}: {len(run.fleet.meeting_ids)} meetings, {len(run.fleet.users)} users ready after "
        f"{time.monotonic() - setup_began:.1f} s of set-up"
    )
    if not await run.wait_idle():
        notes.append(f"sessions still live before N={n}")
    return True


def load_audio(config: LoadTestConfig, work_dir: Path) -> AudioLoop:
    """The client audio: ``config.wav`` or speech synthesised into ``work_dir``, cut into chunks."""
    path = config.wav or synthesize(work_dir)
    return AudioLoop(load_pcm16(path), round(config.chunk_s * SAMPLE_RATE_HZ), load_transcript(path))


async def run_loadtest(config: LoadTestConfig, restart: Callable[[], int] | None = None) -> dict[str, Any]:
    """Run every step (within the time budget) and return the report (see ``report.write_outputs``).
    ``restart``: for the fault mode, kills the server with SIGKILL and starts it again (returns its pid)."""
    began, wall_start = time.monotonic(), datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="captions-loadtest-") as work_dir:
        audio = load_audio(config, Path(work_dir))
    plan = FleetPlan(terms=config.terms, chunk_s=config.chunk_s, decoding=config.decoding)
    fleet = await open_fleet(config.base_url, config.admin_password, plan)
    steps: list[dict[str, Any]] = []
    notes: list[str] = []
    async with httpx.AsyncClient(base_url=config.base_url, timeout=30) as http:
        run = _Run(config, audio, fleet, http, restart)
        try:
            for n in config.steps:
                if not await _prepare_step(run, n, began, notes):
                    break
                steps.append(await _Step(run, n).execute())
                if not steps[-1]["realtime"] and not config.continue_past_capacity:
                    notes.append(f"stopped after N={n}: first step that was not real time")
                    break
        finally:
            await fleet.close()
    return {
        "label": config.label,
        "started_at": wall_start.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - began, 1),
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "loadavg": os.getloadavg()},
        "config": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in asdict(config).items()
            if k not in ("admin_password", "progress")
        },
        "criteria": asdict(config.criteria),
        "steps": steps,
        "capacity": capacity(steps),
        "notes": notes,
    }
