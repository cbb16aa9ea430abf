"""Caption files: WebVTT, SRT and plain text from (start_s, end_s, text) cues."""

from __future__ import annotations

from collections.abc import Sequence

Cue = tuple[float, float, str]


def _clock(seconds: float, decimal: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def _monotonic(cues: Sequence[Cue]) -> list[Cue]:
    """Cues in time order with end >= start and no cue starting before the previous one."""
    out: list[Cue] = []
    last_start = 0.0
    for start, end, text in sorted(cues, key=lambda c: (c[0], c[1])):
        start = max(start, last_start)
        out.append((start, max(end, start + 0.001), " ".join(text.split())))
        last_start = start
    return out


def render_captions(fmt: str, cues: Sequence[Cue]) -> tuple[str, str]:
    """The caption file and its media type for ``fmt`` in vtt, srt, text."""
    ordered = _monotonic(cues)
    if fmt == "vtt":
        blocks = [
            f"{i}\n{_clock(s, '.')} --> {_clock(e, '.')}\n{t}\n"
            for i, (s, e, t) in enumerate(ordered, start=1)
        ]
        return "WEBVTT\n\n" + "\n".join(blocks), "text/vtt; charset=utf-8"
    if fmt == "srt":
        blocks = [
            f"{i}\n{_clock(s, ',')} --> {_clock(e, ',')}\n{t}\n"
            for i, (s, e, t) in enumerate(ordered, start=1)
        ]
        return "\n".join(blocks), "application/x-subrip; charset=utf-8"
    if fmt == "text":
        return "".join(f"{t}\n" for _, _, t in ordered), "text/plain; charset=utf-8"
    raise ValueError(f"unknown caption format {fmt!r}: expected json, vtt, srt or text")
