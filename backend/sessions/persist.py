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

from backend.edge.logs import get_logger

log = get_logger(__name__)
T = TypeVar("T")


class PersistFailed(RuntimeError):
    """A caption could not be stored after every attempt."""


@dataclass
class PersistHealth:
    """When storing a caption last failed (monotonic seconds; None: the last attempt succeeded), and how
    long (``not_ready_s``) a failure keeps the replica not ready. ``probe`` tries the failed write again
    without keeping it; ``recheck`` runs it at most every ``probe_interval_s`` while unhealthy."""

    not_ready_s: float = 30.0
    probe_interval_s: float = 1.0
    failed_at: float | None = None
    probe: Callable[[], Awaitable[None]] | None = None
    probed_at: float = 0.0

    def healthy(self) -> bool:
        """False for ``not_ready_s`` after a failure, unless a caption (or the probe) was written since."""
        return self.failed_at is None or time.monotonic() - self.failed_at > self.not_ready_s

    async def recheck(self) -> None:
        """While unhealthy, try the probe (at most every ``probe_interval_s``): healthy again as soon as the
        database takes a caption again (the disk was freed), not only ``not_ready_s`` later. Sessions are
        refused meanwhile, so no caption could otherwise prove it (issue 36: ~28 s of 503s after a freed
        disk)."""
        now = time.monotonic()
        if self.healthy() or self.probe is None or now - self.probed_at < self.probe_interval_s:
            return
        self.probed_at = now
        try:
            await self.probe()
        except (SQLAlchemyError, OSError) as exc:
            log.info("persist_probe_failed", error=type(exc).__name__)
            return
        log.info("persist_recovered")
        self.failed_at, self.probe = None, None


async def with_retries(
    health: PersistHealth,
    failures: Any,
    store: Callable[[], Awaitable[T]],
    attempts: int,
    probe: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """``await store()``, tried ``attempts`` times on database and OS errors; ``failures`` is the metric
    counted per failure; ``probe`` (a write like ``store``'s, not kept) lets ``health`` see the recovery.
    PersistFailed after the last attempt."""
    for attempt in range(1, attempts + 1):
        try:
            result = await store()
        except (SQLAlchemyError, OSError) as exc:
            health.failed_at = time.monotonic()
            health.probe = probe
            failures.inc()
            log.error("persist_failed", attempt=attempt, error=f"{type(exc).__name__}: {exc}"[:300])
            if attempt == attempts:
                raise PersistFailed("captions cannot be stored right now") from exc
            await asyncio.sleep(0.25 * 2 ** (attempt - 1))
        else:
            health.failed_at = None
            return result
    raise AssertionError("unreachable")  # pragma: no cover
