"""Speech for tests: a sentence spoken by espeak-ng as 16 kHz mono float32, padded with silence."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile


def spoken(sentence: str, work_dir: Path) -> np.ndarray:
    """``sentence`` by espeak-ng (en-us, 150 wpm), 0.5 s of silence before and 1.5 s after."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is missing: `make test` installs it (scripts/install_system_deps.sh)")
    path = work_dir / "speech.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), sentence], check=True)
    audio, rate = soundfile.read(path, dtype="float32")
    if rate != 16000:
        import soxr

        audio = soxr.resample(audio, rate, 16000).astype(np.float32)
    return np.concatenate([np.zeros(8000, np.float32), audio, np.zeros(24000, np.float32)])
