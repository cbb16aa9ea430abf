"""Alembic wiring: migrations live in the top-level ``migrations/`` folder; the URL comes from Settings."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from backend.config import REPO_ROOT, get_settings


def alembic_config(database_url: str | None = None) -> Config:
    """An Alembic config pointing at ``migrations/`` and at ``database_url`` (default: the settings')."""
    config = Config()
    config.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    config.attributes["database_url"] = database_url or get_settings().database_url
    return config


def _ensure_sqlite_dir(url: str) -> None:
    prefix = "sqlite+aiosqlite:///"
    if url.startswith(prefix) and url != prefix + ":memory:":
        from pathlib import Path

        Path(url[len(prefix) :]).parent.mkdir(parents=True, exist_ok=True)


def upgrade(revision: str = "head", database_url: str | None = None) -> None:
    """Apply migrations up to ``revision``."""
    config = alembic_config(database_url)
    _ensure_sqlite_dir(config.attributes["database_url"])
    command.upgrade(config, revision)


def downgrade(revision: str = "base", database_url: str | None = None) -> None:
    """Revert migrations down to ``revision``."""
    command.downgrade(alembic_config(database_url), revision)
