"""The service in a child process, for what a thread cannot show: its own memory, and kill -9.

``ServerProcess(settings, step_s=...)`` runs ``python -m tests.support.server_process`` with the app
started exactly as ``captions serve`` starts it (``DrainingServer`` and ``server_config``), on the fake
decoder (``SerialEngine`` when ``step_s`` is given: every stream's steps share one worker). The parent
migrates the database first, as ``LiveServer`` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from backend.config import Settings
from backend.db.migrate import upgrade
from tests.support.server import wait_until_ready

SETTINGS_ENV = "CAPTIONS_TEST_SERVER_SETTINGS"
ENGINE_ENV = "CAPTIONS_TEST_SERVER_STEP_S"
ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """The app served by uvicorn in a child process on ``settings.port``."""

    def __init__(self, settings: Settings, step_s: float | None = None, migrate: bool = True) -> None:
        if migrate:
            worker = threading.Thread(target=upgrade, args=("head", settings.database_url))
            worker.start()
            worker.join()
        self.settings = settings
        self.step_s = step_s
        self.base_url = f"http://127.0.0.1:{settings.port}"
        self.ws_url = f"ws://127.0.0.1:{settings.port}/ws"
        self.origin = f"http://127.0.0.1:{settings.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 120.0) -> ServerProcess:
        env = os.environ | {SETTINGS_ENV: self.settings.model_dump_json()}
        if self.step_s is not None:
            env[ENGINE_ENV] = str(self.step_s)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.server_process"], cwd=ROOT, env=env
        )
        wait_until_ready(self.base_url, timeout_s, self._check_alive)
        return self

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"server process exited with {self.process.returncode}")

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("not started")
        return self.process.pid

    def memory_kib(self) -> dict[str, int]:
        """The process's resident memory now (``VmRSS``) and at its peak (``VmHWM``), KiB."""
        fields = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
        return fields

    def reset_peak_memory(self) -> None:
        """Start ``VmHWM`` again from the current resident memory (Linux ``clear_refs`` 5)."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def kill(self) -> None:
        """kill -9: no drain, no shutdown, whatever was in memory is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM, as an orchestrator stops it: drain, then exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout_s)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()


def _serve() -> None:
    from backend.app import create_app
    from backend.server import DrainingServer, server_config
    from tests.support.busy_engine import SerialEngine
    from tests.support.fake_engine import FakeEngine

    settings = Settings(**json.loads(os.environ[SETTINGS_ENV]))
    step_s = os.environ.get(ENGINE_ENV)
    engine: Any = SerialEngine(step_s=float(step_s)) if step_s else FakeEngine()
    app = create_app(settings, engine=engine)
    server = DrainingServer(server_config(app, settings, "127.0.0.1", settings.port), app)
    asyncio.run(server.serve())


if __name__ == "__main__":
    _serve()
