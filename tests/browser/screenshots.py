"""Screenshots of each page at 1280 and 390 px for docs/screenshots/, taken the way the page tests run
(real server, scripted engine, Debian's Chromium with a fake microphone).

Run: ``.venv/bin/python -m tests.browser.screenshots [folder]`` (default ``docs/screenshots``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from tests.browser.chromium import chromium_args, synthesize_speech
from tests.browser.speech_engine import LoudnessEngine
from tests.support.server import ADMIN_PASSWORD, LiveServer, login, make_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
WIDTHS = {1280: 800, 390: 844}
TERMS = [
    {"text": "linezolid", "display": "Linezolid"},
    {"text": "heparin"},
    {"text": "apixaban", "weight": 1.5},
    {"text": "Okafor"},
]


def prepare(rest: Any) -> str:
    """A vocabulary, a live meeting using it and an ended one; returns the live meeting's id."""
    vocabulary = rest.post("/api/vocabularies", json={"name": "Cardiology"}).json()["vocabulary"]
    rest.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": TERMS}).raise_for_status()
    body = {"chunk_s": 0.56, "decoding": "greedy", "vocabulary_ids": [vocabulary["id"]]}
    live = rest.post("/api/meetings", json={"title": "Ward round", **body}).json()["meeting"]
    rest.post(f"/api/meetings/{live['id']}/start").raise_for_status()
    ended = rest.post("/api/meetings", json={"title": "Morning handover", **body}).json()["meeting"]
    rest.post(f"/api/meetings/{ended['id']}/start").raise_for_status()
    rest.post(f"/api/meetings/{ended['id']}/end").raise_for_status()
    return live["id"]


def log_in(page: Any, url: str) -> None:
    page.goto(url)
    page.fill("#login-username", "admin")
    page.fill("#login-password", ADMIN_PASSWORD)
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login", state="hidden")


def shoot(page: Any, folder: Path, name: str, width: int) -> str:
    if page.locator(".toast").count():
        page.wait_for_selector(".toast", state="hidden")
    file = f"{name}-{width}.png"
    page.screenshot(path=str(folder / file))
    return file


def pages_at(
    browser: Any, base_url: str, meeting_id: str, width: int, folder: Path, view_url: str, invite_path: str
) -> list[str]:
    context = browser.new_context(viewport={"width": width, "height": WIDTHS[width]})
    page = context.new_page()
    page.goto(f"{base_url}/?meeting={meeting_id}")
    page.wait_for_selector("#login-username")
    taken = [shoot(page, folder, "login", width)]
    guest_context = browser.new_context(viewport={"width": width, "height": WIDTHS[width]})
    guest = guest_context.new_page()  # a guest with a view-only link, no account
    guest.goto(base_url + view_url)
    guest.wait_for_selector("#connection[data-state=live]")
    log_in(page, f"{base_url}/?meeting={meeting_id}")
    page.click("#start")
    page.wait_for_function("document.querySelectorAll('#caption-log .line').length >= 2", timeout=30_000)
    page.wait_for_function("document.querySelector('#caption-log .partial').textContent.length > 0")
    taken.append(shoot(page, folder, "captions", width))
    guest.wait_for_function("document.querySelectorAll('#caption-log .line').length >= 2", timeout=30_000)
    taken.append(shoot(guest, folder, "meeting-view", width))
    guest_context.close()
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")

    page.goto(f"{base_url}/transcripts?id={meeting_id}")  # the meeting's transcript, to correct
    page.wait_for_selector("#lines li.line")
    taken.append(shoot(page, folder, "transcript", width))
    page.goto(f"{base_url}/transcripts")
    page.wait_for_selector("#meeting-list li")
    page.fill("#search-q", "linezolid")
    page.press("#search-q", "Enter")
    page.wait_for_selector("#hits li")
    taken.append(shoot(page, folder, "transcripts", width))

    page.goto(f"{base_url}/dictation")
    page.click("#start")
    page.wait_for_function("document.querySelector('#note').value.length > 0", timeout=30_000)
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    taken.append(shoot(page, folder, "dictation", width))
    page.fill("#note", "")  # nothing left to warn about on the way out

    page.goto(f"{base_url}/admin")
    page.wait_for_selector("#terms-table tbody tr")
    taken.append(shoot(page, folder, "admin", width))
    tabs = (
        ("meetings", "#meetings-table tbody tr"),
        ("stats", "#stats-table tbody tr"),
        ("users", "#users-table tbody tr"),
        ("viewer-links", "#viewer-links-table tbody tr"),
    )
    for tab, ready in tabs:
        page.click(f"[data-tab={tab}]")
        page.wait_for_selector(ready)
        taken.append(shoot(page, folder, f"admin-{tab}", width))
    context.close()
    invitee = browser.new_context(viewport={"width": width, "height": WIDTHS[width]})
    invite = invitee.new_page()
    invite.goto(base_url + invite_path)
    invite.wait_for_selector("input[type=password]")
    taken.append(shoot(invite, folder, "invite", width))
    invitee.close()
    return taken


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        wav = synthesize_speech(Path(scratch))
        settings = make_settings(Path(scratch))
        with LiveServer(settings, LoudnessEngine()) as server, sync_playwright() as playwright:
            rest = login(server.base_url)
            meeting_id = prepare(rest)
            link = rest.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": "Gallery"}).json()
            invited = {"username": "okafor", "display_name": "Dr Okafor", "invite": True}
            invite_path = rest.post("/api/users", json=invited).json()["invite"]["path"]
            rest.close()
            chromium = shutil.which("chromium") or shutil.which("chromium-browser")
            args = chromium_args(wav)
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=args)
            for width in WIDTHS:
                taken = pages_at(
                    browser, server.base_url, meeting_id, width, folder, link["url"], invite_path
                )
                for file in taken:
                    print(folder / file)
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT / "docs" / "screenshots")
