"""Debian's Chromium as the page tests run it: a fake microphone playing a synthesised sentence."""

from __future__ import annotations

import subprocess
from pathlib import Path

SPOKEN = "Today we review the linezolid dosing protocol."


def synthesize_speech(folder: Path) -> Path:
    """Write ``SPOKEN`` (espeak-ng, then sox to 16 kHz mono PCM16 with silence around it) into ``folder``."""
    raw = folder / "espeak.wav"
    wav = folder / "speech.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", str(raw), SPOKEN], check=True)
    subprocess.run(
        ["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav), "pad", "0.3", "1.5"], check=True
    )
    return wav


def chromium_args(speech_wav: Path) -> list[str]:
    """Chromium's switches for the tests: a fake microphone playing ``speech_wav``, no background traffic."""
    return [
        "--no-sandbox",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={speech_wav}",
        "--autoplay-policy=no-user-gesture-required",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-renderer-backgrounding",
        "--disable-background-timer-throttling",
    ]
