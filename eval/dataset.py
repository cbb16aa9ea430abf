"""Writing and reading a contextual set on disk.

Layout of a set directory::

    manifest.json   NeMo manifest (JSON lines): audio_filepath (relative to the directory), duration, text,
                    utt_id, domain, group, voice, local_list, global_list, full_list, term_ids
    lists.json      terms (id -> display, typed, kind, domain, rare_words) and lists (id -> term ids)
    wav/<utt>.wav   16 kHz mono PCM16, held-out festival voices

Audio comes from festival (one process per voice and batch of utterances).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly
from tqdm import tqdm

from eval.generate import ContextSet, Utterance

SAMPLE_RATE_HZ = 16000
PAD_S = 0.25
FESTIVAL_BATCH = 8  # utterances per festival process (progress granularity)
PEAK = 0.5


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def speak_festival(jobs: Sequence[tuple[str, Path]], voice: str) -> None:
    """Speak each ``(text, wav_path)`` with festival ``voice`` in ONE festival process (start-up and voice
    loading are most of a short sentence's cost); writes 16 kHz PCM16 WAVs. RuntimeError if festival fails."""
    lines = [f"(voice_{voice})"]
    for text, wav in jobs:
        lines += [
            f"(set! utt (utt.synth (Utterance Text {_scheme_string(text)})))",
            f"(utt.wave.resample utt {SAMPLE_RATE_HZ})",
            f"(utt.save.wave utt {_scheme_string(str(wav))} 'riff)",
        ]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "speak.scm"
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        done = subprocess.run(
            ["festival", "--batch", str(script)], capture_output=True, text=True, check=False
        )  # noqa: S603, S607
    missing = [str(wav) for _, wav in jobs if not wav.exists()]
    if done.returncode != 0 or missing:
        raise RuntimeError(f"festival voice {voice} failed ({missing[:3]}): {done.stderr.strip()[:300]}")


def read_16k(path: Path) -> np.ndarray:
    """A WAV (any rate, any channels) as 16 kHz mono float32."""
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    audio = audio.mean(axis=1)
    if rate != SAMPLE_RATE_HZ:
        gcd = np.gcd(rate, SAMPLE_RATE_HZ)
        audio = resample_poly(audio, SAMPLE_RATE_HZ // gcd, rate // gcd).astype(np.float32)
    return audio


def level_and_pad(audio: np.ndarray) -> np.ndarray:
    """Fixed padding and peak level (no random augmentation: the set must be reproducible)."""
    pad = np.zeros(round(PAD_S * SAMPLE_RATE_HZ), dtype=np.float32)
    peak = float(np.abs(audio).max()) or 1.0
    return np.concatenate([pad, audio * (PEAK / peak), pad]).astype(np.float32)


def manifest_entry(utterance: Utterance, wav_rel: str, duration_s: float) -> dict[str, Any]:
    """One NeMo manifest line for ``utterance``."""
    return {
        "audio_filepath": wav_rel,
        "duration": round(duration_s, 3),
        "text": utterance.text,
        "utt_id": utterance.utt_id,
        "domain": utterance.domain,
        "group": utterance.group,
        "voice": f"festival:{utterance.voice}",
        **utterance.list_ids(),
        "term_ids": list(utterance.term_ids),
    }


def write_set(context_set: ContextSet, out_dir: Path, train_text: Path | None) -> Path:
    """Synthesise every utterance and write the manifest and lists; returns the manifest path."""
    wav_dir = out_dir / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    by_voice: dict[str, list[Utterance]] = {}
    for utterance in context_set.utterances:
        by_voice.setdefault(utterance.voice, []).append(utterance)
    with tqdm(total=len(context_set.utterances), desc="synthesising", unit="utt") as bar:
        for voice, utterances in by_voice.items():
            for start in range(0, len(utterances), FESTIVAL_BATCH):
                batch = utterances[start : start + FESTIVAL_BATCH]
                speak_festival([(u.text, wav_dir / f"{u.utt_id}.raw.wav") for u in batch], voice)
                bar.update(len(batch))
    entries = []
    for utterance in context_set.utterances:
        raw = wav_dir / f"{utterance.utt_id}.raw.wav"
        audio = level_and_pad(read_16k(raw))
        raw.unlink()
        wav_rel = f"wav/{utterance.utt_id}.wav"
        sf.write(str(out_dir / wav_rel), audio, SAMPLE_RATE_HZ, subtype="PCM_16")
        entries.append(manifest_entry(utterance, wav_rel, len(audio) / SAMPLE_RATE_HZ))
    manifest = out_dir / "manifest.json"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    meta = context_set.to_json()
    meta["train_text"] = (
        None
        if train_text is None
        else {"path": str(train_text), "sha256": hashlib.sha256(train_text.read_bytes()).hexdigest()}
    )
    (out_dir / "lists.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return manifest


@dataclass(frozen=True)
class EvalItem:
    """One manifest line resolved for decoding: absolute audio path and the list ids of each biasing mode."""

    utt_id: str
    audio_path: Path
    duration_s: float
    text: str
    group: str
    lists: dict[str, str | None]  # mode ("local", "global", "full", or a term-free set's list) -> list id


@dataclass(frozen=True)
class EvalSet:
    """A manifest and its lists.json: ``terms`` maps id -> {"display", "typed", ...}; ``lists`` id -> ids."""

    items: tuple[EvalItem, ...]
    terms: dict[str, dict[str, Any]]
    lists: dict[str, list[str]]

    def list_texts(self, list_id: str, casing: str) -> list[str]:
        """The term strings of a list: ``casing`` "display" (target-cased) or "typed" (lower case)."""
        texts = [self.terms[tid]["display"] for tid in self.lists[list_id]]
        return texts if casing == "display" else [t.lower() for t in texts]

    def modes(self) -> set[str]:
        """The biasing modes some item has a list for (``--biasing`` may name these and "none")."""
        return {mode for item in self.items for mode, list_id in item.lists.items() if list_id is not None}

    def keywords(self, casing: str) -> list[str]:
        """Every term of the set (the keyword list of the F-score), display or lower case, de-duplicated."""
        texts = [t["display"] for t in self.terms.values()]
        if casing != "display":
            texts = [t.lower() for t in texts]
        return list(dict.fromkeys(texts))


def load_set(
    manifest: Path, lists_json: Path | None = None, limit: int | None = None, groups: set[str] | None = None
) -> EvalSet:
    """Read a manifest and its ``lists.json`` (default: next to the manifest; a manifest without one, e.g.
    ``training.real_data``'s, has no terms and no lists); ``groups`` keeps the items of those manifest groups
    (e.g. ``real`` of a term-free set); ``limit`` keeps the first N."""
    lists_path = lists_json or manifest.parent / "lists.json"
    if lists_json is None and not lists_path.is_file():
        meta: dict[str, Any] = {"terms": {}, "lists": {}}
    else:
        meta = json.loads(lists_path.read_text(encoding="utf-8"))
    items = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        audio = Path(entry["audio_filepath"])
        if not audio.is_absolute():
            audio = manifest.parent / audio
        items.append(
            EvalItem(
                utt_id=entry.get("utt_id", audio.stem),
                audio_path=audio,
                duration_s=float(entry["duration"]),
                text=entry["text"],
                group=entry.get("group", ""),
                lists={k.removesuffix("_list"): v for k, v in entry.items() if k.endswith("_list")},
            )
        )
    if groups is not None:
        items = [item for item in items if item.group in groups]
    if limit is not None:
        items = items[:limit]
    return EvalSet(items=tuple(items), terms=meta["terms"], lists=meta["lists"])
