"""Login rate limits and password hashing under attack (issue 29, items 3 and 7)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

import backend.edge.security
from backend.edge.security import PasswordBusy, PasswordWorker, hash_password
from tests.support.fake_engine import FakeEngine
from tests.support.server import LiveServer, make_settings


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), FakeEngine()) as server:
        yield server


def wrong(username: str = "admin") -> dict[str, str]:
    return {"username": username, "password": "not the password"}


@pytest.mark.slow
def test_a_changing_x_forwarded_for_does_not_reset_the_limit(live: LiveServer) -> None:
    with httpx.Client(base_url=live.base_url, timeout=30) as client:
        statuses = [
            client.post(
                "/api/auth/login", json=wrong(), headers={"x-forwarded-for": f"10.0.0.{n}"}
            ).status_code
            for n in range(8)
        ]
    assert statuses == [401] * 5 + [429] * 3


@pytest.mark.slow
@pytest.mark.parametrize(("trusted", "limited"), [("", True), ("127.0.0.1", False)])
def test_forwarded_addresses_count_only_from_a_configured_proxy(
    tmp_path: Path, trusted: str, limited: bool
) -> None:
    """Unknown usernames are limited per client address (20 here): a client that names itself in
    X-Forwarded-For is one client unless it is a proxy named in CAPTIONS_TRUSTED_PROXIES."""
    settings = make_settings(tmp_path, trusted_proxies=trusted)
    with LiveServer(settings, FakeEngine()) as server, httpx.Client(base_url=server.base_url) as client:
        statuses = [
            client.post(
                "/api/auth/login", json=wrong(f"nobody{n}"), headers={"x-forwarded-for": f"10.0.{n}.1"}
            ).status_code
            for n in range(22)
        ]
    assert statuses == [401] * 20 + ([429] * 2 if limited else [401] * 2)


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    from pydantic import ValidationError

    from backend.config import Settings

    assert Settings(trusted_proxies="10.0.0.5, 172.30.240.0/24").trusted_proxies
    with pytest.raises(ValidationError, match="refused"):
        Settings(trusted_proxies="*")


@pytest.mark.slow
async def test_concurrent_wrong_passwords_are_counted_before_they_are_checked(live: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live.base_url, timeout=60) as client:
        answers = await asyncio.gather(*(client.post("/api/auth/login", json=wrong()) for _ in range(20)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [401] * 5 + [429] * 15


def test_unknown_usernames_are_limited_per_client(client: TestClient) -> None:
    statuses = [client.post("/api/auth/login", json=wrong(f"nobody{n}")).status_code for n in range(22)]
    assert statuses == [401] * 20 + [429] * 2


def test_a_right_password_is_not_counted_as_a_failure(client: TestClient) -> None:
    from tests.support.server import ADMIN_PASSWORD

    for _ in range(3):
        for _ in range(4):
            assert client.post("/api/auth/login", json=wrong()).status_code == 401
        right = {"username": "admin", "password": ADMIN_PASSWORD}
        assert client.post("/api/auth/login", json=right).status_code == 200


def test_argon2_runs_on_the_password_pool_not_the_event_loop(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    real = backend.edge.security._hasher

    class Recording:
        def verify(self, password_hash: str, password: str) -> bool:
            threads.append(threading.current_thread().name)
            return real.verify(password_hash, password)

        def hash(self, password: str) -> str:
            threads.append(threading.current_thread().name)
            return real.hash(password)

    monkeypatch.setattr(backend.edge.security, "_hasher", Recording())
    assert client.post("/api/auth/login", json=wrong()).status_code == 401
    assert threads and all(name.startswith("argon2") for name in threads), threads


async def test_the_password_pool_is_bounded() -> None:
    worker = PasswordWorker(threads=1, max_pending=2)
    stored = hash_password("x")
    outcomes = await asyncio.gather(*(worker.verify(stored, "x") for _ in range(3)), return_exceptions=True)
    assert outcomes[:2] == [True, True]
    assert isinstance(outcomes[2], PasswordBusy)


def test_a_cookie_stops_working_after_logout(admin: TestClient) -> None:
    from tests.support.server import ADMIN_PASSWORD

    stolen = admin.cookies.get("captions_session")
    csrf = admin.headers["x-csrf-token"]
    assert admin.post("/api/auth/logout").status_code == 200
    admin.cookies.clear()
    replayed = admin.get("/api/auth/me", cookies={"captions_session": stolen})
    assert replayed.status_code == 401
    assert (
        admin.post(
            "/api/vocabularies",
            json={"name": "x"},
            cookies={"captions_session": stolen},
            headers={"x-csrf-token": csrf},
        ).status_code
        == 401
    )
    again = admin.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert again.status_code == 200
    assert admin.get("/api/auth/me").status_code == 200


# ----- issue 36: nobody can lock somebody else out; a flood of refused logins is cheap ---------------------


def right() -> dict[str, str]:
    from tests.support.server import ADMIN_PASSWORD

    return {"username": "admin", "password": ADMIN_PASSWORD}


def from_address(client: httpx.Client, address: str, body: dict[str, str]) -> int:
    return client.post("/api/auth/login", json=body, headers={"x-forwarded-for": address}).status_code


@pytest.mark.slow
def test_wrong_passwords_from_one_address_do_not_lock_the_user_out_elsewhere(tmp_path: Path) -> None:
    """Five wrong passwords from anywhere used to lock any username, the admin's included, for 300 s."""
    settings = make_settings(tmp_path, trusted_proxies="127.0.0.1")
    with LiveServer(settings, FakeEngine()) as server, httpx.Client(base_url=server.base_url) as client:
        assert [from_address(client, "10.0.0.66", wrong()) for _ in range(7)] == [401] * 5 + [429] * 2
        assert from_address(client, "10.0.0.66", right()) == 429  # that address is locked for admin
        assert from_address(client, "10.0.0.2", right()) == 200  # the admin at their own desk is not


@pytest.mark.slow
def test_a_known_browser_logs_in_while_its_user_is_locked_out_everywhere(tmp_path: Path) -> None:
    """Guessing from many addresses locks the username for new browsers (here after 10 failures); a browser
    that logged in as the user before (its device cookie) still gets in with the right password, and its
    own wrong passwords lock only itself."""
    settings = make_settings(tmp_path, trusted_proxies="127.0.0.1", login_max_failures_per_user=10)
    with (
        LiveServer(settings, FakeEngine()) as server,
        httpx.Client(base_url=server.base_url) as known,
        httpx.Client(base_url=server.base_url) as attacker,
    ):
        assert from_address(known, "10.0.0.2", right()) == 200
        assert "captions_device" in known.cookies
        assert [from_address(attacker, f"10.1.0.{n}", wrong()) for n in range(12)] == [401] * 10 + [429] * 2
        with httpx.Client(base_url=server.base_url) as new_browser:
            assert from_address(new_browser, "10.0.0.3", right()) == 429
        assert from_address(known, "10.1.0.1", right()) == 200  # even from an attacker's address
        assert [from_address(known, "10.0.0.2", wrong()) for _ in range(6)] == [401] * 5 + [429]
        forged = {"captions_device": known.cookies["captions_device"] + "x"}
        attacker.cookies.update(forged)
        assert from_address(attacker, "10.1.0.99", right()) == 429  # a forged cookie is no device


@pytest.mark.slow
async def test_a_locked_out_address_is_refused_before_its_body_is_read(live: LiveServer) -> None:
    """A locked-out client's next login is answered 429 before the server reads its body (no parsing, no
    database, no log line): here the body never comes and the answer does."""
    with httpx.Client(base_url=live.base_url) as client:
        assert [client.post("/api/auth/login", json=wrong(f"x{n}")).status_code for n in range(21)][-1] == 429
    reader, writer = await asyncio.open_connection("127.0.0.1", live.settings.port)
    writer.write(
        b"POST /api/auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 60\r\n\r\n"
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert status_line.startswith(b"HTTP/1.1 429")
    writer.close()
