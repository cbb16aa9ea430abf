"""Cache the frozen Whisper encoder's outputs (20 ms frames, float16) for NeMo manifests.

Two encodings per utterance are possible:

* ``full``: the whole utterance in one window (what offline transcription sees);
* ``stream``: what NeMo's buffered streaming pipeline sees: the utterance is encoded in windows of
  ``left + chunk + right`` seconds and only each window's chunk frames are kept, concatenated.

The cache is a ``torch.save`` list of ``{"feats": [T, D] float16, "text": str, "duration": float}``.

``--device cuda --batch 64`` encodes ``full`` utterances in padded batches on a GPU (the encoder masks the
padding, so each utterance's frames are what it gets alone); ``--plain`` loads the model without NeMo
(``training/plain.py``).

Usage::

    python -m training.features --model training/work/init.nemo \
        --manifest training/work/train/manifest_u0.json \
        --out training/work/cache/train_full.pt
"""

from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from tqdm import tqdm

WHISPER_FRAME_S = 0.02


def load_model(path: Path):  # noqa: ANN201
    """The NeMo model at ``path`` (CPU, eval mode)."""
    from nemo.collections.asr.models import ASRModel

    import captions_model.nemo_encoder  # noqa: F401 - registers our _target_ prefixes with NeMo

    model = ASRModel.restore_from(str(path), map_location="cpu")
    model.eval()
    return model


@torch.inference_mode()
def whisper_frames(model, audio: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    """Whisper encoder output [T, D] (20 ms frames) for one unpadded waveform [S]."""
    return whisper_frames_batch(model, [audio])[0]


@torch.inference_mode()
def whisper_frames_batch(model, audios: list[torch.Tensor]) -> list[torch.Tensor]:  # noqa: ANN001
    """Whisper encoder outputs [T_i, D] of unpadded waveforms, encoded as one zero-padded batch on the
    model's device (returned on the CPU)."""
    device = next(model.parameters()).device
    x = torch.nn.utils.rnn.pad_sequence(audios, batch_first=True).to(device)
    lengths = torch.tensor([a.numel() for a in audios], device=device)
    feats, feat_len = model.preprocessor(input_signal=x, length=lengths)
    enc, enc_len = model.encoder.whisper_encode(feats, feat_len)
    return [enc[i, : int(enc_len[i])].cpu() for i in range(len(audios))]


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


def read_16k_file(path: str) -> np.ndarray:
    """A 16 kHz audio file (WAV as synthesised, FLAC or Ogg Opus as packed) as float32; other rates are
    refused, not resampled."""
    audio, sr = sf.read(path, dtype="float32")
    if sr != 16000:
        raise ValueError(f"{path}: expected 16 kHz, got {sr}")
    return audio


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
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is lent")
    parser.add_argument("--batch", type=int, default=1, help="utterances per batch (full mode)")
    parser.add_argument("--plain", action="store_true", help="plain PyTorch model, no NeMo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.plain:
        from training.plain import load_plain

        model = load_plain(args.model, args.device)
    else:
        model = load_model(args.model).to(args.device)
    entries = [json.loads(line) for m in args.manifest for line in m.read_text().splitlines() if line.strip()]
    if args.limit:
        entries = entries[: args.limit]
    if args.mode == "full" and args.batch > 1:  # similar lengths together: padded batches waste little
        entries.sort(key=lambda e: e["duration"])
    batch = args.batch if args.mode == "full" else 1
    out = []
    with tqdm(total=len(entries), desc=f"encode ({args.mode})") as bar, ThreadPoolExecutor(4) as readers:
        for start in range(0, len(entries), batch):
            group = entries[start : start + batch]
            wavs = [
                torch.from_numpy(a) for a in readers.map(read_16k_file, [e["audio_filepath"] for e in group])
            ]
            if args.mode == "full":
                feats = whisper_frames_batch(model, wavs)
            else:
                feats = [streamed_frames(model, wavs[0], args.left, args.chunk, args.right).cpu()]
            for e, f in zip(group, feats, strict=True):
                out.append(
                    {
                        "feats": f.half().clone(),
                        "text": e["text"],
                        "duration": e["duration"],
                        "voice": e.get("voice", ""),
                    }
                )
            bar.update(len(group))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")  # atomic: a running trainer may pick up new caches
    torch.save(out, tmp)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {len(out)} utterances")


if __name__ == "__main__":
    main()
