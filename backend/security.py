"""Passwords, cookie sessions, CSRF tokens, API tokens and WebSocket tickets."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeTimedSerializer

_hasher = PasswordHasher()

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
    user_id: int
    csrf_token: str


class SessionCodec:
    """Signs the admin/user cookie session (user id + CSRF token) with the service secret."""

    def __init__(self, secret_key: str, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt="captions.session")
        self.max_age_s = max_age_s

    def dumps(self, session: CookieSession) -> str:
        return self._serializer.dumps({"uid": session.user_id, "csrf": session.csrf_token})

    def loads(self, value: str) -> CookieSession | None:
        """The session in a cookie, or None when it is forged, malformed or older than ``max_age_s``."""
        try:
            data = self._serializer.loads(value, max_age=self.max_age_s)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("uid"), int):
            return None
        return CookieSession(user_id=data["uid"], csrf_token=str(data.get("csrf", "")))


def csrf_matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected, given or "")


class LoginRateLimiter:
    """At most ``max_failures`` failed logins per key within ``window_s``; protects the password hashes.

    The deque per key holds the monotonic times of recent failures (event-loop thread only).
    """

    def __init__(self, max_failures: int, window_s: float) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._failures: dict[str, deque[float]] = defaultdict(deque)

    def _prune(self, key: str, now: float) -> deque[float]:
        times = self._failures[key]
        while times and now - times[0] > self.window_s:
            times.popleft()
        return times

    def blocked(self, key: str) -> bool:
        return len(self._prune(key, time.monotonic())) >= self.max_failures

    def failed(self, key: str) -> None:
        self._prune(key, time.monotonic()).append(time.monotonic())

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)
