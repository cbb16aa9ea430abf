"""At 390 px (a phone): the dictation note stays inside its card and its buttons are not covered; no page
scrolls sideways (wide admin tables scroll inside their own box)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import each_admin_tab, live_meeting, log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
BOX = "(el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"
# The element at the centre of each button (scrolled into view) is the button itself or inside it.
ON_TOP = """(el) => {
  el.scrollIntoView({ block: 'center' });
  const r = el.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return hit === el || el.contains(hit);
}"""
PAGE_WIDTH = "[document.scrollingElement.scrollWidth, window.innerWidth]"
LONG_MICROPHONE_NAME = """() => {
  const select = document.querySelector('#microphone');
  select.append(new Option('Headset Microphone (USB Audio Device, analog stereo)', 'usb', true, true));
}"""


def inside(inner: list[float], outer: list[float]) -> bool:
    left, top, right, bottom = inner
    slack = 0.5  # sub-pixel rounding
    return (
        left >= outer[0] - slack
        and top >= outer[1] - slack
        and right <= outer[2] + slack
        and bottom <= outer[3] + slack
    )


def test_dictation_fits_a_phone(page: Any, server: Any) -> None:
    page.set_viewport_size(PHONE)
    log_in(page, server.base_url, "/dictation")
    page.wait_for_selector("#terms li")
    page.evaluate(LONG_MICROPHONE_NAME)
    scroll_width, viewport = page.evaluate(PAGE_WIDTH)
    assert scroll_width <= viewport, f"the page is {scroll_width} px wide on a {viewport} px screen"
    note_card = page.locator(".dictation-layout > .card").first.evaluate(BOX)
    terms_card = page.locator(".dictation-layout > .card").nth(1).evaluate(BOX)
    assert inside(page.locator("#note").evaluate(BOX), note_card), "the note box spills out of its card"
    assert inside(page.locator("#microphone").evaluate(BOX), note_card), "the microphone list spills out"
    for name in ("Copy note", "Export as text", "Clear"):
        button = page.get_by_role("button", name=name)
        box = button.evaluate(BOX)
        assert inside(box, note_card), f"{name} is outside the note's card"
        assert box[3] <= terms_card[1] or box[1] >= terms_card[3], f"{name} overlaps the “My terms” card"
        assert button.evaluate(ON_TOP), f"{name} is covered"


def test_admin_tabs_do_not_scroll_sideways_on_a_phone(page: Any, server: Any, rest: Any) -> None:
    live_meeting(rest, "Cardiology ward round", terms=({"text": "linezolid", "display": "Linezolid"},))
    page.set_viewport_size(PHONE)
    log_in(page, server.base_url, "/admin")
    page.wait_for_selector("#terms-table tbody tr")
    widths = {"vocabularies": page.evaluate(PAGE_WIDTH)}
    for tab in each_admin_tab(page):
        widths[tab] = page.evaluate(PAGE_WIDTH)
    too_wide = {tab: width for tab, (width, viewport) in widths.items() if width > viewport}
    assert not too_wide, f"admin tabs wider than {PHONE['width']} px: {too_wide}"
