"""Container entrypoint: turn secret files into the settings the service reads, then run the command.

- ``CAPTIONS_SECRET_KEY_FILE``, ``CAPTIONS_ADMIN_PASSWORD_FILE`` and ``CAPTIONS_DATABASE_URL_FILE`` (Docker
  secrets under /run/secrets) become ``CAPTIONS_SECRET_KEY``, ``CAPTIONS_ADMIN_PASSWORD`` and
  ``CAPTIONS_DATABASE_URL``: the ``*_FILE`` convention of the postgres image.
- Without ``CAPTIONS_DATABASE_URL``, ``POSTGRES_HOST``, ``POSTGRES_PORT``, ``POSTGRES_USER``,
  ``POSTGRES_DB`` and ``POSTGRES_PASSWORD_FILE`` (the same secret the database container reads) build a
  postgresql+asyncpg URL, so the password lives in one file only.

The command then replaces this process (``os.execvp``), so it receives the container's stop signal itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence
from urllib.parse import quote

FILE_SETTINGS = ("CAPTIONS_SECRET_KEY", "CAPTIONS_ADMIN_PASSWORD", "CAPTIONS_DATABASE_URL")
EXIT_USAGE = 64


class EntrypointError(Exception):
    """A configuration mistake the operator must fix; the message names the variable."""


def _read_secret(variable: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as secret:
            # Like the postgres image: only trailing newlines are dropped, so both containers agree.
            return secret.read().rstrip("\n")
    except OSError as exc:
        raise EntrypointError(f"{variable}={path}: cannot read the file ({exc.strerror})") from exc


def load_file_settings(env: MutableMapping[str, str]) -> None:
    """Replace each ``NAME_FILE`` of ``FILE_SETTINGS`` by ``NAME`` holding the file's contents."""
    for name in FILE_SETTINGS:
        file_variable = f"{name}_FILE"
        path = env.pop(file_variable, "")
        if not path:
            continue
        if env.get(name):
            raise EntrypointError(f"both {name} and {file_variable} are set; set only one")
        value = _read_secret(file_variable, path)
        if not value:
            raise EntrypointError(f"{file_variable}={path} is empty")
        env[name] = value


def postgres_url(env: MutableMapping[str, str]) -> str:
    """The postgresql+asyncpg URL from the POSTGRES_* variables; user, password and name are URL-quoted."""
    password = _read_secret("POSTGRES_PASSWORD_FILE", env["POSTGRES_PASSWORD_FILE"])
    if not password:
        raise EntrypointError(f"POSTGRES_PASSWORD_FILE={env['POSTGRES_PASSWORD_FILE']} is empty")
    user = quote(env.get("POSTGRES_USER", "postgres"), safe="")
    database = quote(env.get("POSTGRES_DB", env.get("POSTGRES_USER", "postgres")), safe="")
    host = env.get("POSTGRES_HOST", "db")
    port = env.get("POSTGRES_PORT", "5432")
    return f"postgresql+asyncpg://{user}:{quote(password, safe='')}@{host}:{port}/{database}"


def prepare_environment(env: MutableMapping[str, str]) -> None:
    """Apply both rules above to ``env`` in place."""
    load_file_settings(env)
    if not env.get("CAPTIONS_DATABASE_URL") and env.get("POSTGRES_PASSWORD_FILE"):
        env["CAPTIONS_DATABASE_URL"] = postgres_url(env)


def main(argv: Sequence[str]) -> int:
    """Prepare ``os.environ`` and exec ``argv``; returns only on a configuration error."""
    if not argv:
        print("docker-entrypoint: no command given", file=sys.stderr)
        return EXIT_USAGE
    try:
        prepare_environment(os.environ)
    except EntrypointError as exc:
        print(f"docker-entrypoint: {exc}", file=sys.stderr)
        return EXIT_USAGE
    os.execvp(argv[0], list(argv))
    return 0  # not reached: execvp replaces the process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
