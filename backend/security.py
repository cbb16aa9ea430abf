"""Passwords, cookie sessions, CSRF tokens, API tokens and WebSocket tickets."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import secrets
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeTimedSerializer

_hasher = PasswordHasher()
T = TypeVar("T")

SESSION_COOKIE = "captions_session"


def hash_password(password: str) -> str:
    """Argon2id hash of ``password``."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True when ``password`` matches; never raises on a malformed hash."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def new_token(nbytes: int = 32) -> str:
    """A random URL-safe token (tickets, API tokens, resume tokens)."""
    return secrets.token_urlsafe(nbytes)


def token_hash(token: str) -> str:
    """SHA-256 hex of a token; only this is stored, so a database leak cannot be replayed."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class CookieSession:
    """What the signed cookie holds: the user, the CSRF token, and the user's session epoch at login."""

    user_id: int
    csrf_token: str
    epoch: int = 0


class SessionCodec:
    """Signs the admin/user cookie session (user id + CSRF token) with the service secret."""

    def __init__(self, secret_key: str, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt="captions.session")
        self.max_age_s = max_age_s

    def dumps(self, session: CookieSession) -> str:
        return self._serializer.dumps(
            {"uid": session.user_id, "csrf": session.csrf_token, "ep": session.epoch}
        )

    def loads(self, value: str) -> CookieSession | None:
        """The session in a cookie, or None when it is forged, malformed or older than ``max_age_s``."""
        try:
            data = self._serializer.loads(value, max_age=self.max_age_s)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("uid"), int):
            return None
        epoch = data.get("ep", 0)
        return CookieSession(
            user_id=data["uid"],
            csrf_token=str(data.get("csrf", "")),
            epoch=epoch if isinstance(epoch, int) else -1,
        )


def csrf_matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected, given or "")


class LoginRateLimiter:
    """Login attempts per username (``max_failures``) and per client address (``max_failures_per_client``,
    by default 4x: several people may share an address) within ``window_s``; protects the password hashes.

    ``begin`` counts an attempt BEFORE the password is checked, with no ``await`` between the check and the
    count, so concurrent attempts cannot all pass; ``succeeded`` takes the attempt back and clears the
    username's failures. Unknown usernames count against the client address too. ``_attempts`` maps a key
    to the monotonic times of its recent attempts (event-loop thread only); at ``max_keys`` keys, expired
    ones and then the oldest tenth are dropped, so random usernames cannot grow it without bound.
    """

    def __init__(
        self,
        max_failures: int,
        window_s: float,
        max_failures_per_client: int | None = None,
        max_keys: int = 100_000,
    ) -> None:
        self.max_failures = max_failures
        self.max_failures_per_client = max_failures_per_client or 4 * max_failures
        self.window_s = window_s
        self.max_keys = max_keys
        self._attempts: dict[str, deque[float]] = {}

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._attempts.get(key)
        if times is None:
            if len(self._attempts) >= self.max_keys:
                self._evict(now)
            times = self._attempts[key] = deque()
        while times and now - times[0] > self.window_s:
            times.popleft()
        return times

    def _evict(self, now: float) -> None:
        for key in [k for k, t in self._attempts.items() if not t or now - t[-1] > self.window_s]:
            del self._attempts[key]
        for key in list(itertools.islice(self._attempts, len(self._attempts) - self.max_keys * 9 // 10)):
            del self._attempts[key]

    def begin(self, username: str, client: str) -> bool:
        """Count a login attempt; False (nothing counted) when the username or the client is blocked."""
        now = time.monotonic()
        by_user = self._recent(_user_key(username), now)
        by_client = self._recent(f"client:{client}", now)
        if len(by_user) >= self.max_failures or len(by_client) >= self.max_failures_per_client:
            return False
        by_user.append(now)
        by_client.append(now)
        return True

    def succeeded(self, username: str, client: str) -> None:
        """The attempt was right: it is no failure, and the username's earlier failures are forgiven."""
        self._attempts.pop(_user_key(username), None)
        by_client = self._attempts.get(f"client:{client}")
        if by_client:
            by_client.pop()


def _user_key(username: str) -> str:
    return "user:" + username[:256].casefold()  # no real username is that long; bounds the key's memory


class PasswordBusy(RuntimeError):
    """Too many password hashes are already queued; the caller should answer "retry later"."""


class PasswordWorker:
    """Runs argon2 (tens of ms of CPU each) off the event loop on a small dedicated pool: ``threads`` at a
    time, at most ``max_pending`` running or waiting (PasswordBusy beyond), so a login flood neither
    stalls the captions on the event loop nor queues unbounded work. ``pending`` is event-loop only."""

    def __init__(self, threads: int = 2, max_pending: int = 16) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="argon2")
        self.max_pending = max_pending
        self.pending = 0

    async def _run(self, function: Callable[..., T], *args: str) -> T:
        if self.pending >= self.max_pending:
            raise PasswordBusy("too many password checks at once")
        self.pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)
        finally:
            self.pending -= 1

    async def verify(self, password_hash: str, password: str) -> bool:
        """``verify_password`` in the pool."""
        return await self._run(verify_password, password_hash, password)

    async def hash(self, password: str) -> str:
        """``hash_password`` in the pool."""
        return await self._run(hash_password, password)

    def close(self) -> None:
        """Stop the pool's threads (after the last request)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
