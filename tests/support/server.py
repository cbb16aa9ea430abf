"""A real uvicorn server on 127.0.0.1 and a free port, in a background thread, for protocol tests.

``LiveServer(settings, engine)`` starts the app exactly as ``captions serve`` does (DrainingServer and the
same uvicorn options); ``stop()`` drains like SIGTERM. Restart on the same database by building a new
LiveServer with the same settings.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.config import Settings
from backend.db.migrate import upgrade
from backend.server import DrainingServer, server_config

ADMIN_PASSWORD = "correct horse battery staple"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for a throwaway service: SQLite in ``tmp_path``, fixed admin password, free port."""
    port = overrides.pop("port", None) or free_port()
    values: dict[str, Any] = {
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 'captions.db'}",
        "data_dir": tmp_path / "data",
        "cache_dir": tmp_path / "cache",
        "admin_password": ADMIN_PASSWORD,
        "secret_key": "test-secret-key-0123456789",
        "port": port,
        "allowed_origins": [f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
        "log_level": "warning",
    }
    values.update(overrides)
    return Settings(**values)


def wait_until_ready(base_url: str, timeout_s: float, check_alive: Callable[[], None]) -> None:
    """Poll ``/readyz`` until it answers 200; ``check_alive`` raises when the server died meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        check_alive()
        try:
            if httpx.get(base_url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the server at {base_url} did not become ready")


class LiveServer:
    """uvicorn serving ``create_app(settings, engine)`` in a thread; the database is migrated first."""

    def __init__(self, settings: Settings, engine: Any = None, migrate: bool = True) -> None:
        if migrate:  # in a thread: Alembic's async env calls asyncio.run, and tests may hold a loop
            worker = threading.Thread(target=upgrade, args=("head", settings.database_url))
            worker.start()
            worker.join()
        self.settings = settings
        self.app = create_app(settings, engine=engine)
        self.server = DrainingServer(server_config(self.app, settings, "127.0.0.1", settings.port), self.app)
        self.thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)
        self.base_url = f"http://127.0.0.1:{settings.port}"
        self.ws_url = f"ws://127.0.0.1:{settings.port}/ws"
        self.origin = f"http://127.0.0.1:{settings.port}"

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve()

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the server's event loop, as the server itself would (a load change)."""
        self.loop.call_soon_threadsafe(callback)

    def start(self, timeout_s: float = 120.0) -> LiveServer:
        self.thread.start()
        wait_until_ready(self.base_url, timeout_s, self._check_alive)
        return self

    def _check_alive(self) -> None:
        if not self.thread.is_alive():
            raise RuntimeError("server thread died during start-up")

    @property
    def services(self) -> Any:
        return self.app.state.services

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful stop, as on SIGTERM: drain, then uvicorn's shutdown."""
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TimeoutError("server did not stop")

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.thread.is_alive():
            self.stop()


def query(database_url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read straight from the database (in a thread: callers may hold an event loop)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    async def fetch() -> list[tuple[Any, ...]]:
        engine = create_async_engine(database_url)
        async with engine.connect() as connection:
            rows = (await connection.execute(text(sql))).all()
        await engine.dispose()
        return [tuple(r) for r in rows]

    result: list[list[tuple[Any, ...]]] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(fetch())))
    worker.start()
    worker.join()
    return result[0]


def login(base_url: str, username: str = "admin", password: str = ADMIN_PASSWORD) -> httpx.Client:
    """An httpx client logged in with the cookie session, sending the CSRF header on every request."""
    client = httpx.Client(base_url=base_url, timeout=30)
    response = client.post("/api/auth/login", json={"username": username, "password": password})
    response.raise_for_status()
    client.headers["x-csrf-token"] = response.json()["csrf_token"]
    return client
