"""Shared fixtures. Torch gets one intra-op thread: two made small calls hundreds of times slower here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.db.migrate import upgrade
from tests.support.fake_engine import FakeEngine
from tests.support.postgres import PostgresCluster
from tests.support.server import ADMIN_PASSWORD, make_settings

torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that hold slow or browser tests run first: pytest-xdist hands test files to its workers in
    this order, so the long ones start early and the quick ones even out the end (both workers finish
    together instead of one waiting on the last long file). Order within a file is kept."""
    long = ("slow", "browser")
    slow = {item.path for item in items if any(item.get_closest_marker(name) for name in long)}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One real PostgreSQL server for the whole run (each test gets its own database)."""
    cluster = PostgresCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same tests run on SQLite and on a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'captions.db'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    settings = make_settings(tmp_path, database_url=database_url)
    upgrade("head", settings.database_url)
    return settings


@pytest.fixture
def fake_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def client(settings: Settings, fake_engine: FakeEngine) -> Iterator[TestClient]:
    """In-process app (lifespan run) on the fake engine, not logged in."""
    with TestClient(
        create_app(settings, engine=fake_engine), base_url=f"http://127.0.0.1:{settings.port}"
    ) as c:
        yield c


@pytest.fixture
def admin(client: TestClient) -> TestClient:
    """The same client, logged in as the admin, sending the CSRF header."""
    response = client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert response.status_code == 200, response.text
    client.headers["x-csrf-token"] = response.json()["csrf_token"]
    return client
