"""The async database handle: one engine and session factory per process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine


def as_utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC, so attach it."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _enable_sqlite_foreign_keys(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


class Database:
    """Owns the SQLAlchemy async engine; ``session()`` yields a unit of work that commits on success."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: AsyncEngine = create_async_engine(url, pool_pre_ping=True)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine.sync_engine, "connect", _enable_sqlite_foreign_keys)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session in a transaction: committed when the block exits normally, rolled back otherwise."""
        async with self._sessions() as session, session.begin():
            yield session

    async def ping(self) -> bool:
        """True when the database answers ``SELECT 1``."""
        try:
            async with self.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception:  # noqa: BLE001 - any driver error means "not reachable"
            return False
        return True

    async def dispose(self) -> None:
        await self.engine.dispose()
