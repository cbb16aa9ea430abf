"""The service container: everything a request handler needs, built once in the app's lifespan."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from backend.config import Settings
from backend.db.models import Role, User
from backend.db.session import Database
from backend.edge.logs import get_logger
from backend.edge.metrics import Metrics
from backend.edge.security import DeviceCodec, LoginRateLimiter, PasswordWorker, SessionCodec, hash_password
from backend.engine.contract import CaptionEngine
from backend.sessions.ladder import LoadLadder, Rung
from backend.sessions.live import LiveHub
from backend.sessions.persist import PersistHealth
from biasing.terms import TermLimits

log = get_logger(__name__)


class EngineUnavailable(RuntimeError):
    """The decoder could not be started."""


@dataclass
class Services:
    """Owned by the app; ``engine`` is the batched decoder (or a test double with the same API)."""

    settings: Settings
    db: Database
    engine: CaptionEngine
    session_codec: SessionCodec
    login_limiter: LoginRateLimiter
    devices: DeviceCodec
    term_limits: TermLimits
    metrics: Metrics = field(default_factory=Metrics)
    hub: LiveHub = field(init=False)
    ladder: LoadLadder = field(init=False)
    persist: PersistHealth = field(init=False)
    passwords: PasswordWorker = field(init=False)
    engine_startup: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.hub = LiveHub(self.db, self.engine, self.engine_started)
        self.ladder = LoadLadder(
            thresholds_s=ladder_thresholds(self.settings),
            down_after_s=self.settings.ladder_down_after_s,
            shed_interval_s=self.settings.ladder_shed_interval_s,
            window_s=self.settings.ladder_window_s,
        )
        self.persist = PersistHealth(
            not_ready_s=self.settings.persist_not_ready_s,
            probe_interval_s=self.settings.persist_probe_interval_s,
        )
        settings = self.settings
        self.passwords = PasswordWorker(settings.password_hash_threads, settings.password_hash_queue)

    async def engine_started(self) -> None:
        """Wait for the model to be loaded and warm; EngineUnavailable if it failed to start."""
        if self.engine_startup is not None:
            try:
                await asyncio.shield(self.engine_startup)
            except Exception as exc:
                raise EngineUnavailable("the speech model failed to load; see the service log") from exc

    @property
    def tokenizer(self) -> Any:
        """The decoder's tokenizer, so terms it cannot represent are rejected at the edge (None: skip)."""
        return self.engine.tokenizer

    def readiness(self) -> dict[str, bool]:
        """The checks behind /readyz (the database is pinged separately, it is async)."""
        return {
            "engine": bool(self.engine.ready),
            "not_draining": not self.hub.draining,
            "capacity": self.hub.slots.total < self.settings.max_sessions,
            # the degradation ladder (backend/sessions/ladder.py)
            "not_lagging": self.ladder.rung < Rung.REFUSE_NEW,
            "persisting": self.persist.healthy(),
        }

    def accepting_sessions(self) -> bool:
        return all(self.readiness().values())


def ladder_thresholds(settings: Settings) -> tuple[float, ...]:
    """The backlog at which each rung of the degradation ladder is climbed; a rung set higher than the one
    above it is climbed with that one (the order of the rungs never changes)."""
    levels = [
        settings.ladder_second_pass_off_s,
        settings.ladder_greedy_s,
        settings.lag_drop_partials_s,
        settings.lag_not_ready_s,
        settings.lag_busy_s,
    ]
    for i in range(len(levels) - 2, -1, -1):
        levels[i] = min(levels[i], levels[i + 1])
    return tuple(levels)


def secret_key(settings: Settings) -> str:
    """The configured secret, or one generated once and kept in ``data_dir`` (mode 600)."""
    if settings.secret_key:
        return settings.secret_key
    path = settings.data_dir / "secret_key"
    if not path.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(48))
    return path.read_text().strip()


async def ensure_admin(settings: Settings, db: Database) -> None:
    """Create the first admin when the database has no user (password from settings or a 0600 file).

    Replicas starting together may race: the loser's insert violates the unique username and is ignored."""
    try:
        await _create_first_admin(settings, db)
    except IntegrityError:
        log.info("admin_created_by_another_replica")


async def _create_first_admin(settings: Settings, db: Database) -> None:
    async with db.session() as session:
        if (await session.execute(select(func.count(User.id)))).scalar_one() > 0:
            return
        password = settings.admin_password
        if password is None:
            password = secrets.token_urlsafe(12)
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            path = settings.data_dir / "admin-password.txt"
            path.touch(mode=0o600)
            path.write_text(password + "\n")
            log.warning("admin_created", username=settings.admin_username, password_file=str(path))
        session.add(
            User(username=settings.admin_username, password_hash=hash_password(password), role=Role.ADMIN)
        )
