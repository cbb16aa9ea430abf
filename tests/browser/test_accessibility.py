"""axe-core finds no serious or critical violation on any page, logged out and in, at desktop and phone
widths."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.browser.axe import axe_violations, blocking, describe
from tests.browser.conftest import ARTIFACTS, each_admin_tab, live_meeting, log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}


def check(page: Any, where: str, found: dict[str, list[dict[str, Any]]]) -> None:
    page.wait_for_timeout(200)  # let the last render frame and fade-ins settle
    found[where] = axe_violations(page)


def captions_states(page: Any, base_url: str, meeting_id: str, found: dict) -> None:
    page.goto(f"{base_url}/?meeting={meeting_id}")
    page.wait_for_selector("#login-username")
    check(page, "captions login", found)
    log_in(page, base_url, f"/?meeting={meeting_id}")
    page.wait_for_selector("#captions:not([hidden])")
    check(page, "captions idle", found)
    page.click("#start")
    page.wait_for_selector("#caption-log .line", timeout=20_000)
    page.wait_for_function("document.querySelector('#caption-log .partial').textContent.length > 0")
    check(page, "captions live", found)
    page.check("#contrast")
    check(page, "captions live, high contrast", found)
    page.uncheck("#contrast")
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    page.goto(f"{base_url}/")
    page.wait_for_selector("#picker:not([hidden])")
    check(page, "meeting picker", found)


def dictation_states(page: Any, base_url: str, found: dict) -> None:
    page.goto(f"{base_url}/dictation")
    page.wait_for_selector("#dictation:not([hidden])")
    page.wait_for_selector("#terms li")
    check(page, "dictation", found)


def admin_states(page: Any, base_url: str, found: dict) -> None:
    page.goto(f"{base_url}/admin")
    page.wait_for_selector("#terms-table tbody tr")
    check(page, "admin vocabularies", found)
    for tab in each_admin_tab(page):
        check(page, f"admin {tab}", found)


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_no_serious_axe_violations(page: Any, server: Any, rest: Any, width: str) -> None:
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    meeting = live_meeting(rest, "Ward round", terms=({"text": "linezolid", "display": "Linezolid"},))
    found: dict[str, list[dict[str, Any]]] = {}
    captions_states(page, server.base_url, meeting["id"], found)
    dictation_states(page, server.base_url, found)
    admin_states(page, server.base_url, found)

    ARTIFACTS.mkdir(exist_ok=True)
    counts = {where: dict(Counter(v["impact"] for v in vs)) for where, vs in found.items()}
    report = json.dumps({"counts": counts, "violations": found}, indent=1)
    (ARTIFACTS / f"axe-{width}.json").write_text(report, encoding="utf-8")
    problems = "\n".join(describe(where, blocking(vs)) for where, vs in found.items() if blocking(vs))
    assert not problems, f"axe-core at {WIDTHS[width][0]} px:\n{problems}"
