"""``--start-server``: ``captions serve`` as a subprocess on a free port, with a throwaway SQLite database
and data directory; stopped with SIGTERM (the service drains) and killed if it does not exit in time."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from backend.config import REPO_ROOT

STOP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """The service in a child process. ``extra_env`` (``CAPTIONS_*``) overrides the throwaway settings."""

    def __init__(
        self,
        extra_env: dict[str, str] | None = None,
        start_timeout_s: float = 600.0,
        checkout: Path | None = None,
    ) -> None:
        self.checkout = checkout or REPO_ROOT  # the source tree `captions serve` runs from
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.admin_password = secrets.token_urlsafe(16)
        self.start_timeout_s = start_timeout_s
        self.work_dir = Path(tempfile.mkdtemp(prefix="captions-loadtest-server-"))
        self.log_path = self.work_dir / "server.log"
        self.env = (
            os.environ
            | {
                "CAPTIONS_PORT": str(self.port),
                "CAPTIONS_HOST": "127.0.0.1",
                "CAPTIONS_DATABASE_URL": f"sqlite+aiosqlite:///{self.work_dir / 'captions.db'}",
                "CAPTIONS_DATA_DIR": str(self.work_dir / "data"),
                "CAPTIONS_CACHE_DIR": str(self.work_dir / "cache"),
                "CAPTIONS_ADMIN_PASSWORD": self.admin_password,
                "CAPTIONS_ALLOWED_ORIGINS": json.dumps([self.base_url]),
                "CAPTIONS_LOG_LEVEL": "warning",
            }
            | (extra_env or {})
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "backend.cli", *args]

    def start(self) -> ServerProcess:
        """Migrate the database, start serving and wait for /readyz (raises with the log tail)."""
        subprocess.run(
            self._cli("migrate"),
            env=self.env,
            cwd=self.checkout,
            check=True,
            capture_output=True,
            timeout=300,
        )
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self._cli("serve"), env=self.env, cwd=self.checkout, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.base_url + "/readyz", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"the server was not ready after {self.start_timeout_s:.0f} s:\n{self.log_tail()}")

    def kill_and_restart(self) -> int:
        """The load test's fault: SIGKILL (no drain, nothing flushed), then start again on the same port and
        database; returns the new pid."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.start()
        if self.process is None:
            raise RuntimeError("the server did not restart")
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM (drain), then SIGKILL after ``STOP_TIMEOUT_S``; removes the throwaway files."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
