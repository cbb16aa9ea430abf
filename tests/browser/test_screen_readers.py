"""Screen readers hear committed lines (not partials); "Read new lines aloud" speaks them for everyone;
the keyboard focus ring stands out from what is around it (at least 3:1)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.conftest import live_meeting, log_in
from tests.browser.speech_engine import SENTENCE
from tests.browser.static_site import serve_frontend
from tests.browser.test_capture_errors import API

pytestmark = pytest.mark.browser

ORIGIN = "http://captions.localhost"
FOCUS_MIN_CONTRAST = 3.0
RECORD_SPEECH = """
  window.__spoken = [];
  Object.defineProperty(window, 'speechSynthesis', { configurable: true, value: {
    speak: (utterance) => window.__spoken.push(utterance.text),
    cancel: () => window.__spoken.push('<cancel>'),
  } });
"""
# The focused element's outline colour and the colour behind it (the nearest painted ancestor's).
FOCUS_COLOURS = """(el) => {
  el.focus();
  const style = getComputedStyle(el);
  let node = el.parentElement, behind = 'rgb(255, 255, 255)';
  while (node) {
    const bg = getComputedStyle(node).backgroundColor;
    if (bg !== 'rgba(0, 0, 0, 0)' && bg !== 'transparent') { behind = bg; break; }
    node = node.parentElement;
  }
  return { visible: el.matches(':focus-visible'), style: style.outlineStyle,
           width: parseFloat(style.outlineWidth), ring: style.outlineColor, behind };
}"""


def luminance(css: str) -> float:
    """WCAG relative luminance of an ``rgb()``/``rgba()`` colour (alpha ignored: the ring is opaque)."""
    channels = [int(x) / 255 for x in re.findall(r"[\d.]+", css)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    low, high = sorted((luminance(a), luminance(b)))
    return (high + 0.05) / (low + 0.05)


def test_committed_lines_are_announced_politely_and_partials_are_not(page: Any) -> None:
    serve_frontend(page, ORIGIN, API)
    page.goto(f"{ORIGIN}/?meeting=1")
    page.wait_for_selector("#captions:not([hidden])")
    log = page.locator("#caption-log")
    assert log.get_attribute("role") == "log"
    assert log.get_attribute("aria-live") == "polite"
    assert page.locator("#caption-log .partial").get_attribute("aria-hidden") == "true"
    assert page.locator("[aria-live=off]").count() == 0


@pytest.mark.parametrize("contrast_mode", ["normal", "high"])
def test_focus_ring_has_three_to_one_contrast(page: Any, contrast_mode: str) -> None:
    page.add_init_script(f"localStorage.setItem('captions.contrast', '{contrast_mode}')")
    serve_frontend(page, ORIGIN, API)
    page.goto(f"{ORIGIN}/?meeting=1")
    page.wait_for_selector("#captions:not([hidden])")
    page.keyboard.press("Tab")  # keyboard use: programmatic focus then shows :focus-visible
    for selector in ("#start", "#microphone", "#contrast", "#caption-log", "[data-export=vtt]", ".topnav a"):
        found = page.locator(selector).first.evaluate(FOCUS_COLOURS)
        assert found["visible"] and found["style"] != "none" and found["width"] >= 2, (selector, found)
        ratio = contrast(found["ring"], found["behind"])
        where = f"{selector}: ring {found['ring']} on {found['behind']}"
        assert ratio >= FOCUS_MIN_CONTRAST, f"{where} is {ratio:.2f}:1"


@pytest.mark.slow
def test_read_new_lines_aloud_speaks_finals_only(page: Any, server: Any, rest: Any) -> None:
    page.add_init_script(RECORD_SPEECH)
    meeting = live_meeting(rest, "Ward round")
    log_in(page, server.base_url, f"/?meeting={meeting['id']}")
    page.wait_for_selector("#captions:not([hidden])")
    announce = page.get_by_label("Read new lines aloud")
    assert announce.is_enabled()
    announce.check()
    page.click("#start")
    page.wait_for_function("document.querySelector('#caption-log .partial').textContent.length > 0")
    page.wait_for_selector("#caption-log .line", timeout=20_000)
    page.wait_for_function("window.__spoken.length > 0")
    lines = page.locator("#caption-log .line").all_inner_texts()
    assert page.evaluate("window.__spoken") == lines[: len(page.evaluate("window.__spoken"))]
    assert lines[0] == SENTENCE
    page.click("#stop")
    page.wait_for_selector("#connection[data-state=stopped]")
    announce.uncheck()
    assert page.evaluate("window.__spoken").pop() == "<cancel>"
