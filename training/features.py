"""Cache the frozen Whisper encoder's outputs (20 ms frames, float16) for NeMo manifests.

Two encodings per utterance are possible:

* ``full``: the whole utterance in one window (what offline transcription sees);
* ``stream``: what NeMo's buffered streaming pipeline sees: the utterance is encoded in windows of
  ``left + chunk + right`` seconds and only each window's chunk frames are kept, concatenated.

The cache is a ``torch.save`` list of ``{"feats": [T, D] float16, "text": str, "duration": float}``.

Usage::

    python -m training.features --model training/work/init.nemo \
        --manifest training/work/train/manifest_u0.json \
        --out training/work/cache/train_full.pt
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import soundfile as sf
import torch
from tqdm import tqdm

import backend.nemo_modules  # noqa: F401 - registers our _target_ prefix with NeMo

WHISPER_FRAME_S = 0.02


def load_model(path: Path):  # noqa: ANN201
    from nemo.collections.asr.models import ASRModel

    model = ASRModel.restore_from(str(path), map_location="cpu")
    model.eval()
    return model


@torch.inference_mode()
def whisper_frames(model, audio: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    """Whisper encoder output [T, D] (20 ms frames) for one unpadded waveform [S]."""
    feats, feat_len = model.preprocessor(input_signal=audio[None], length=torch.tensor([audio.numel()]))
    x, enc_len = model.encoder.whisper_encode(feats, feat_len)
    return x[0, : int(enc_len[0])]


@torch.inference_mode()
def streamed_frames(
    model, audio: torch.Tensor, left_s: float, chunk_s: float, right_s: float
) -> torch.Tensor:  # noqa: ANN001
    """Chunk frames of buffered windows (left + chunk + right seconds), concatenated: [T, D] at 20 ms."""
    sr = 16000
    chunk, left, right = round(chunk_s * sr), round(left_s * sr), round(right_s * sr)
    per_frame = round(WHISPER_FRAME_S * sr)
    parts = []
    for start in range(0, audio.numel(), chunk):
        lo, hi = max(0, start - left), min(audio.numel(), start + chunk + right)
        x = whisper_frames(model, audio[lo:hi])
        first = (start - lo) // per_frame
        n = math.ceil(min(chunk, audio.numel() - start) / per_frame)
        parts.append(x[first : first + n])
    return torch.cat(parts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=["full", "stream"], default="full")
    parser.add_argument("--left", type=float, default=2.0)
    parser.add_argument("--chunk", type=float, default=1.12)
    parser.add_argument("--right", type=float, default=0.56)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.model)
    entries = [json.loads(line) for m in args.manifest for line in m.read_text().splitlines() if line.strip()]
    if args.limit:
        entries = entries[: args.limit]
    out = []
    for e in tqdm(entries, desc=f"encode ({args.mode})"):
        audio, sr = sf.read(e["audio_filepath"], dtype="float32")
        if sr != 16000:
            raise ValueError(f"{e['audio_filepath']}: expected 16 kHz, got {sr}")
        wav = torch.from_numpy(audio)
        if args.mode == "full":
            feats = whisper_frames(model, wav)
        else:
            feats = streamed_frames(model, wav, args.left, args.chunk, args.right)
        out.append(
            {
                "feats": feats.half().clone(),
                "text": e["text"],
                "duration": e["duration"],
                "voice": e.get("voice", ""),
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")  # atomic: a running trainer may pick up new caches
    torch.save(out, tmp)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {len(out)} utterances")


if __name__ == "__main__":
    main()
