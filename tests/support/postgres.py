"""A throwaway PostgreSQL cluster (Debian's postgresql binaries) in a temp dir on a free port."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.server import free_port


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class PostgresCluster:
    """initdb + pg_ctl start; ``new_database()`` gives each test its own empty database."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (make test installs Debian's postgresql)")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="captions-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._counter = itertools.count()
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresCluster:
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "captions", "--auth=trust", "-E", "UTF8"
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        return self

    def new_database(self) -> str:
        """A fresh empty database; returns its SQLAlchemy asyncpg URL."""
        name = f"test_{next(self._counter)}"
        self._run(
            str(self.bindir / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "captions",
            "-d",
            "postgres",
            "-c",
            f"CREATE DATABASE {name}",
        )
        return f"postgresql+asyncpg://captions@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
