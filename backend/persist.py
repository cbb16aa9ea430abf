"""Storing captions when the database may fail (disk full, connection lost): retries, then a visible failure.

A caption is stored before it is sent. When storing fails, the caption stays in memory and is tried
``CAPTIONS_PERSIST_ATTEMPTS`` times with a short backoff; each failure is logged and counted
(``captions_persist_failures_total``) and marks the replica not ready (``/readyz`` check ``persisting``)
for ``CAPTIONS_PERSIST_NOT_READY_S``, or until a later caption is stored. After the last attempt the session
gets ``PersistFailed`` and tells its client to resume later (the finals stored so far are replayed then).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from backend.logs import get_logger

log = get_logger(__name__)
T = TypeVar("T")


class PersistFailed(RuntimeError):
    """A caption could not be stored after every attempt."""


@dataclass
class PersistHealth:
    """When storing a caption last failed (monotonic seconds; None: the last attempt succeeded), and how
    long (``not_ready_s``) a failure keeps the replica not ready."""

    not_ready_s: float = 30.0
    failed_at: float | None = None

    def healthy(self) -> bool:
        """False for ``not_ready_s`` after a failure, unless a caption was stored since."""
        return self.failed_at is None or time.monotonic() - self.failed_at > self.not_ready_s


async def with_retries(
    health: PersistHealth, failures: Any, store: Callable[[], Awaitable[T]], attempts: int
) -> T:
    """``await store()``, tried ``attempts`` times on database and OS errors; ``failures`` is the metric
    counted per failure. PersistFailed after the last attempt."""
    for attempt in range(1, attempts + 1):
        try:
            result = await store()
        except (SQLAlchemyError, OSError) as exc:
            health.failed_at = time.monotonic()
            failures.inc()
            log.error("persist_failed", attempt=attempt, error=f"{type(exc).__name__}: {exc}"[:300])
            if attempt == attempts:
                raise PersistFailed("captions cannot be stored right now") from exc
            await asyncio.sleep(0.25 * 2 ** (attempt - 1))
        else:
            health.failed_at = None
            return result
    raise AssertionError("unreachable")  # pragma: no cover
