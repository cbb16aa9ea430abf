"""Passwords, cookie sessions, CSRF tokens, API tokens and WebSocket tickets."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeTimedSerializer

from backend.edge.ratelimit import SlidingWindow

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


def new_ticket(api_token_id: int | None) -> str:
    """A WebSocket ticket; one asked for with an API token ends in ``.<its id>``. Only the ticket's hash is
    stored, so the id cannot be changed without the ticket no longer matching."""
    ticket = new_token()
    return ticket if api_token_id is None else f"{ticket}.{api_token_id}"


def ticket_api_token(ticket: str) -> int | None:
    """The API token a (redeemed, hence genuine) ticket was asked for with; None for a cookie session."""
    _, dot, suffix = ticket.rpartition(".")
    return int(suffix) if dot and suffix.isdigit() and len(suffix) < 12 else None


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


DEVICE_COOKIE = "captions_device"
"""A browser that logged in as a user before: it keeps a path for the right password during a lock-out."""


class DeviceCodec:
    """Signs the device cookie: a username (case-folded) and a random device id, set at a successful login
    (OWASP's device cookies: a known browser is not locked out with everyone else)."""

    def __init__(self, secret_key: str, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt="captions.device")
        self.max_age_s = max_age_s

    def dumps(self, username: str, device: str | None = None) -> str:
        """The cookie for ``username``: ``device`` kept, or a new one."""
        return self._serializer.dumps({"u": username.casefold(), "d": device or new_token(12)})

    def device_of(self, value: str | None, username: str | None = None) -> str | None:
        """The device id in a cookie that is genuine, recent and, when ``username`` is given, theirs."""
        if not value:
            return None
        try:
            data = self._serializer.loads(value, max_age=self.max_age_s)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("d"), str):
            return None
        if username is not None and data.get("u") != username.casefold():
            return None
        return data["d"]


class LoginRateLimiter:
    """Failed logins within ``window_s``, counted so that nobody can lock somebody else out (OWASP
    authentication guidance): per username and client address together (``max_failures``), per client
    address (``max_failures_per_client``, any usernames, unknown ones too: several people may share an
    address), and per username from every address (``max_failures_per_user``, against guessing from many
    addresses). A browser with the user's device cookie (``DeviceCodec``) is counted on its own
    (``max_failures``) and never locked by the others: the right password keeps working there.

    ``begin`` counts an attempt BEFORE the password is checked, with no ``await`` between the check and the
    count, so concurrent attempts cannot all pass; ``succeeded`` takes the attempt back and forgets the
    pair's (or device's) failures. Event-loop thread only; memory bounded (``SlidingWindow``)."""

    def __init__(
        self,
        max_failures: int,
        window_s: float,
        max_failures_per_client: int | None = None,
        max_failures_per_user: int | None = None,
        max_keys: int = 100_000,
    ) -> None:
        self.max_failures = max_failures
        self.max_failures_per_client = max_failures_per_client or 4 * max_failures
        self.max_failures_per_user = max_failures_per_user or 20 * max_failures
        self._pairs = SlidingWindow(window_s, max_keys)  # "user|client" or "device:<id>"
        self._clients = SlidingWindow(window_s, max_keys)
        self._users = SlidingWindow(window_s, max_keys)

    def client_locked(self, client: str) -> bool:
        """The client address may not try again (before anything else is read of its request)."""
        return self._clients.recent(client, time.monotonic()) >= self.max_failures_per_client

    def begin(self, username: str, client: str, device: str | None = None) -> bool:
        """Count a login attempt; False (nothing counted) while the attempt's keys are locked."""
        now = time.monotonic()
        keys = self._keys(username, client, device)
        if any(window.recent(key, now) >= limit for window, key, limit in keys):
            return False
        for window, key, _limit in keys:
            window.add(key, now)
        return True

    def locked(self, username: str, client: str, device: str | None = None) -> bool:
        """The next attempt with these keys would be refused."""
        now = time.monotonic()
        return any(
            window.recent(key, now) >= limit for window, key, limit in self._keys(username, client, device)
        )

    def succeeded(self, username: str, client: str, device: str | None = None) -> None:
        """The attempt was right: it is no failure, and the pair's (or device's) earlier ones are forgiven."""
        for window, key, _limit in self._keys(username, client, device):
            window.take_back(key)
        self._pairs.forget(self._keys(username, client, device)[0][1])

    def _keys(self, username: str, client: str, device: str | None) -> list[tuple[SlidingWindow, str, int]]:
        user = _user_key(username)
        if device is not None:
            return [(self._pairs, f"device:{device}", self.max_failures)]
        return [
            (self._pairs, f"{user}|{client}", self.max_failures),
            (self._clients, client, self.max_failures_per_client),
            (self._users, user, self.max_failures_per_user),
        ]


def _user_key(username: str) -> str:
    return username[:256].casefold()  # no real username is that long; bounds the key's memory


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
