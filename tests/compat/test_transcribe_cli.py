"""``captions transcribe`` (issue 47): recordings transcribed on this machine with a vocabulary file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from backend.config import REPO_ROOT
from tests.compat.conftest import TERM
from tests.support.media import encoded, wav_bytes

pytestmark = pytest.mark.slow


def captions(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "CAPTIONS_CACHE_DIR": str(cwd / "cache")}
    command = [sys.executable, "-m", "backend.cli", "transcribe", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_transcribe_writes_each_recording_with_the_vocabulary(tmp_path: Path, speech: np.ndarray) -> None:
    (tmp_path / "a.wav").write_bytes(wav_bytes(speech))
    (tmp_path / "b.mp3").write_bytes(encoded(speech))
    (tmp_path / "terms.txt").write_text(f"# names\n{TERM}\n")
    (tmp_path / "bad.txt").write_text("fine\nbad\u0007term\n")
    done = captions(
        "a.wav", "b.mp3", "--vocabulary", "terms.txt", "--format", "vtt", "--output-dir", "out", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "transcribing: 100%" in done.stderr  # the progress bar, on stderr
    for name in ("a.vtt", "b.vtt"):
        vtt = (tmp_path / "out" / name).read_text()
        assert vtt.startswith("WEBVTT") and TERM in vtt, vtt
    refused = captions("a.wav", "--vocabulary", "bad.txt", cwd=tmp_path)
    assert (
        refused.returncode == 2 and "bad.txt:2:" in refused.stderr and "control character" in refused.stderr
    )
