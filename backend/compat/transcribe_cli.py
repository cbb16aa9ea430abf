"""``captions transcribe FILE... [--vocabulary FILE] [--format srt|vtt|txt|json]``: recordings transcribed on
this machine by the same engine, vocabulary compiler and second pass the server runs (no server, no
database), with a progress bar over all the files' audio on stderr. One transcript per file on stdout, or
beside each recording with ``--output-dir``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from backend.compat.files import FILE_CHUNK_S, Segment, decode_file
from backend.compat.media import MediaError, decode_audio
from backend.config import Settings, engine_config, get_settings
from backend.engine.types import StreamOptions
from backend.text.captions_export import Cue, render_captions
from backend.text.termforms import check_forms
from backend.text.vocab import EffectiveVocabulary, ItemError, VocabularyTerm, parse_import, validate_terms
from biasing.terms import TermLimits

BAR = "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s audio [{elapsed}<{remaining}]"
EXTENSIONS = {"srt": "srt", "vtt": "vtt", "txt": "txt", "json": "json"}
"""``--format`` -> the written file's extension (its options are parsed in ``backend.cli``)."""


def load_vocabulary(
    path: Path, settings: Settings, tokenizer: Any
) -> tuple[list[VocabularyTerm], list[ItemError]]:
    """The vocabulary file's terms, validated as a meeting's (every bad line reported, none skipped)."""
    fmt = "csv" if path.suffix.lower() == ".csv" else "text"
    parsed, errors = parse_import(fmt, path.read_text(encoding="utf-8"))
    limits = TermLimits(max_terms=settings.max_terms_per_vocabulary)
    well_formed, malformed = check_forms(parsed, limits)
    valid, bad = validate_terms(well_formed, limits, tokenizer)
    return [t for _, t in valid], sorted(errors + malformed + bad, key=lambda e: e.position)


def render(fmt: str, segments: list[Segment]) -> str:
    """One file's transcript in ``fmt``."""
    if fmt == "json":
        items = [
            {
                "text": s.text,
                "start_s": s.start_s,
                "end_s": s.end_s,
                "matched_terms": list(s.matched_terms),
                "words": [{"text": w.text, "start_s": w.start_s, "end_s": w.end_s} for w in s.words],
            }
            for s in segments
        ]
        return json.dumps({"segments": items, "text": " ".join(s.text for s in segments)}, indent=2) + "\n"
    cues = [Cue(s.start_s, s.end_s, s.text) for s in segments]
    return render_captions("text" if fmt == "txt" else fmt, cues)[0]


async def _transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from backend.engine import Engine  # loads NeMo: only when the command runs

    recordings: list[tuple[Path, np.ndarray]] = []
    for path in args.files:
        try:
            recordings.append((path, decode_audio(path.read_bytes(), settings.max_recording_s)))
        except (OSError, MediaError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
    engine = Engine(engine_config(settings))
    await engine.start()
    try:
        vocabulary, handle = EffectiveVocabulary(), None
        if args.vocabulary is not None:
            terms, errors = load_vocabulary(args.vocabulary, settings, engine.tokenizer)
            for error in errors:
                print(f"{args.vocabulary}:{error.position}: {error.text!r}: {error.reason}", file=sys.stderr)
            if errors:
                return 2
            vocabulary = EffectiveVocabulary.from_terms(terms)
            handle = await engine.load_vocabulary(vocabulary.bias_terms()) if vocabulary.entries else None
        options = StreamOptions(chunk_s=FILE_CHUNK_S, decoding=settings.default_decoding, vocabulary=handle)
        total_s = sum(len(samples) for _, samples in recordings) / 16000
        with tqdm(total=total_s, unit="s", desc="transcribing", file=sys.stderr, bar_format=BAR) as bar:
            done_s = 0.0
            for path, samples in recordings:

                def advance(decoded_s: float, _total: float, base: float = done_s) -> None:
                    bar.update(base + decoded_s - bar.n)

                segments = await decode_file(engine, options, samples, vocabulary, advance)
                done_s += len(samples) / 16000
                bar.update(done_s - bar.n)
                _write(args, path, render(args.format, segments))
        if handle is not None:
            handle.release()
    finally:
        await engine.stop()
    return 0


def _write(args: argparse.Namespace, path: Path, transcript: str) -> None:
    if args.output_dir is None:
        if len(args.files) > 1:
            sys.stdout.write(f"==> {path} <==\n")
        sys.stdout.write(transcript)
        return
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"{path.stem}.{EXTENSIONS[args.format]}").write_text(transcript, encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    """The ``transcribe`` subcommand."""
    return asyncio.run(_transcribe(args, get_settings()))
