"""Real-browser fixtures: Debian's chromium (Playwright drives it), a fake microphone playing an espeak-ng
sentence, and a real uvicorn server on a temporary SQLite database with the loudness-scripted engine.

Screenshots go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium import chromium_args, synthesize_speech
from tests.browser.speech_engine import LoudnessEngine
from tests.support.server import ADMIN_PASSWORD, LiveServer, login, make_settings

playwright_sync = pytest.importorskip("playwright.sync_api")

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
TIMEOUT_MS = 20_000


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Debian's chromium is not installed (make system-deps installs it)")
    return path


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 kHz mono PCM16 WAV: the sentence, then 1.5 s of silence (Chromium loops the file)."""
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system-deps installs it)")
    return synthesize_speech(tmp_path_factory.mktemp("audio"))


@pytest.fixture(scope="package")  # Playwright's sync loop must be gone before the asyncio tests run
def browser(speech_wav: Path) -> Iterator[object]:
    """One headless chromium for the session, with the fake microphone and no background traffic."""
    executable = _chromium()
    with playwright_sync.sync_playwright() as playwright:
        args = chromium_args(speech_wav)
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    """A fresh context (cookies, storage) and page; page errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real uvicorn on 127.0.0.1 with the loudness-scripted engine and a fresh database."""
    with LiveServer(make_settings(tmp_path), LoudnessEngine()) as live:
        yield live


@pytest.fixture
def rest(server: LiveServer) -> Iterator[object]:
    """An httpx client logged in to ``server`` as the admin (for set-up and for checking results)."""
    client = login(server.base_url)
    yield client
    client.close()


def live_meeting(rest: object, title: str, chunk_s: float = 0.56, terms: tuple[dict, ...] = ()) -> dict:
    """Create a meeting (with a vocabulary holding ``terms``, if any), start it, return it."""
    vocabulary_ids = []
    if terms:
        vocabulary = rest.post("/api/vocabularies", json={"name": f"{title} terms"}).json()["vocabulary"]
        added = rest.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": list(terms)})
        added.raise_for_status()
        vocabulary_ids.append(vocabulary["id"])
    body = {"title": title, "chunk_s": chunk_s, "decoding": "greedy", "vocabulary_ids": vocabulary_ids}
    created = rest.post("/api/meetings", json=body)
    created.raise_for_status()
    meeting = created.json()["meeting"]
    rest.post(f"/api/meetings/{meeting['id']}/start").raise_for_status()
    return meeting


def screenshot(page: object, name: str, full_page: bool = False) -> Path:
    """Save a screenshot of ``page`` as ``test-artifacts/<name>.png`` (after any toast has faded)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if page.locator(".toast").count():
        page.wait_for_selector(".toast", state="hidden")
    page.screenshot(path=str(path), full_page=full_page)
    return path


ADMIN_TABS = (
    ("meetings", "#meetings-table tbody tr"),
    ("live", "#live-table tbody tr"),
    ("stats", "#stats-table tbody tr"),
    ("tokens", "#tokens-table tbody tr"),
)
"""The admin page's tabs after "vocabularies", each with the selector that says its table has loaded."""


def each_admin_tab(page: Any) -> Iterator[str]:
    """Open each tab of ``ADMIN_TABS`` in turn, waiting for its table, and yield its name."""
    for tab, ready in ADMIN_TABS:
        page.click(f"[data-tab={tab}]")
        page.wait_for_selector(ready)
        yield tab


def log_in(
    page: object,
    base_url: str,
    path: str = "/",
    screenshot_as: str | None = None,
    username: str = "admin",
    password: str = ADMIN_PASSWORD,
) -> None:
    """Open ``path`` and log in through the page's own form (as the admin unless ``username`` is given)."""
    page.goto(base_url + path)
    page.wait_for_selector("#login-username")
    if screenshot_as:
        screenshot(page, screenshot_as)
    page.fill("#login-username", username)
    page.fill("#login-password", password)
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login", state="hidden")
