"""Caption files: WebVTT, SRT and plain text from cues on one clock, labelled with their speaker if known.

WebVTT names a cue's speaker with a voice tag (``<v Name>``), SRT and text with a ``Name: `` prefix; text
lines start with the cue's time (``[hh:mm:ss]``). Names and text are one line each; WebVTT escapes them, SRT
and text show ``<`` and ``>`` as look-alikes (SRT players read tags, and ``-->`` would start a cue).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple
from urllib.parse import quote

EXTENSIONS = {"vtt": "vtt", "srt": "srt", "text": "txt"}


class Cue(NamedTuple):
    """One caption: seconds on the file's clock, its text, and who said it (None: unlabelled)."""

    start_s: float
    end_s: float
    text: str
    speaker: str | None = None


def _clock(seconds: float, decimal: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _monotonic(cues: Sequence[Cue]) -> list[Cue]:
    """Cues in time order with end >= start and no cue starting before the previous one (speakers may
    overlap: a cue may start before the previous one ends)."""
    out: list[Cue] = []
    last_start = 0.0
    for cue in sorted(cues, key=lambda c: (c.start_s, c.end_s)):
        start = max(cue.start_s, last_start)
        speaker = _one_line(cue.speaker) if cue.speaker else None
        out.append(Cue(start, max(cue.end_s, start + 0.001), _one_line(cue.text), speaker or None))
        last_start = start
    return out


def _escape_vtt(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _vtt_text(cue: Cue) -> str:
    text = _escape_vtt(cue.text)
    return f"<v {_escape_vtt(cue.speaker)}>{text}" if cue.speaker else text


def _inert(text: str) -> str:
    """Text that no SRT player reads as markup or timing: ``<`` and ``>`` become look-alike angle quotes, so
    a name such as ``<b>Dr</b>`` shows as written and ``-->`` cannot start a cue (SRT has no escapes)."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


def _prefixed(cue: Cue) -> str:
    text = _inert(cue.text)
    return f"{_inert(cue.speaker)}: {text}" if cue.speaker else text


def render_captions(fmt: str, cues: Sequence[Cue]) -> tuple[str, str]:
    """The caption file and its media type for ``fmt`` in vtt, srt, text."""
    ordered = _monotonic(cues)
    if fmt == "vtt":
        blocks = [
            f"{i}\n{_clock(c.start_s, '.')} --> {_clock(c.end_s, '.')}\n{_vtt_text(c)}\n"
            for i, c in enumerate(ordered, start=1)
        ]
        return "WEBVTT\n\n" + "\n".join(blocks), "text/vtt; charset=utf-8"
    if fmt == "srt":
        blocks = [
            f"{i}\n{_clock(c.start_s, ',')} --> {_clock(c.end_s, ',')}\n{_prefixed(c)}\n"
            for i, c in enumerate(ordered, start=1)
        ]
        return "\n".join(blocks), "application/x-subrip; charset=utf-8"
    if fmt == "text":
        lines = [f"[{_clock(c.start_s, '.')[:8]}] {_prefixed(c)}\n" for c in ordered]
        return "".join(lines), "text/plain; charset=utf-8"
    raise ValueError(f"unknown caption format {fmt!r}: expected json, vtt, srt or text")


def export_filename(title: str, fmt: str, day: datetime) -> str:
    """A file name like "weekly-standup-2026-12-02.vtt", as the page's own export names it
    (``frontend/static/js/export.js`` ``exportFilename``): the title's letters and digits, lower case,
    accents dropped, joined by "-", at most 60 characters; the meeting's date."""
    folded = unicodedata.normalize("NFKD", " ".join(title.split()).lower())
    plain = "".join(ch for ch in folded if not unicodedata.category(ch).startswith("M"))
    slug = re.sub(r"[\W_]+", "-", plain).strip("-")[:60].strip("-")
    return f"{slug or 'captions'}-{day.date().isoformat()}.{EXTENSIONS.get(fmt, fmt)}"


def content_disposition(filename: str) -> str:
    """An attachment header for ``filename``: an ASCII fallback and the UTF-8 name (RFC 6266)."""
    fallback = filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"
