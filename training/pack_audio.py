"""Copy a manifest's audio into a small folder for a device call (``training/gpu_pack.sh``): lossless FLAC for
the dev set, or Ogg Opus (~12 kbit/s at level 0.98) for training speech that must fit in what a call carries.
The new manifest's paths are relative to the working directory (the repository root on both machines).
With ``--mb``, the copy stops before the folder's audio would exceed that many megabytes.

Usage::

    python -m training.pack_audio --manifest <manifest.json> --out .gpu/piper --format opus --mb 13
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import soundfile as sf

SUFFIX = {"flac": ".flac", "opus": ".ogg"}


def pack(
    manifest: Path, out: Path, fmt: str, limit: int = 0, budget_mb: float = 0.0, level: float = 0.98
) -> list[dict]:
    """Write each entry's audio to ``out`` in ``fmt`` and ``out/manifest.json``; returns the entries kept."""
    if fmt not in SUFFIX:
        raise ValueError(f"unknown format {fmt!r}: flac or opus")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"*{SUFFIX[fmt]}"):
        old.unlink()
    kept, size = [], 0
    for line in manifest.read_text().splitlines():
        if not line.strip():
            continue
        if limit and len(kept) >= limit:
            break
        entry = json.loads(line)
        audio, sr = sf.read(entry["audio_filepath"], dtype="int16" if fmt == "flac" else "float32")
        path = out / (Path(entry["audio_filepath"]).stem + SUFFIX[fmt])
        if fmt == "flac":
            sf.write(path, audio, sr, format="FLAC")
        else:
            sf.write(path, audio, sr, format="OGG", subtype="OPUS", compression_level=level)
        if budget_mb and size + path.stat().st_size > budget_mb * 1e6:
            path.unlink()
            break
        size += path.stat().st_size
        kept.append({**entry, "audio_filepath": str(path)})
    (out / "manifest.json").write_text("".join(json.dumps(e) + "\n" for e in kept))
    hours = sum(e["duration"] for e in kept) / 3600
    print(f"{out}: {len(kept)} utterances, {hours:.2f} h, {size / 1e6:.1f} MB ({fmt})")
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--format", choices=sorted(SUFFIX), default="flac")
    parser.add_argument("--limit", type=int, default=0, help="at most this many utterances (0: all)")
    parser.add_argument("--mb", type=float, default=0.0, help="at most this many MB of audio (0: no limit)")
    parser.add_argument("--level", type=float, default=0.98, help="Opus compression level (1.0: ~8 kbit/s)")
    args = parser.parse_args()
    pack(args.manifest, args.out, args.format, args.limit, args.mb, args.level)


if __name__ == "__main__":
    main()
