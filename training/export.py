"""Export a training checkpoint (``ckpt.pt``) to a self-contained ``.nemo``, atomically.

The new file is written next to the destination and renamed over it, so a good model is never left half
written. Whisper weights are stored as float16 inside the file (see ``WhisperEncoder``); with ``--half`` the
prediction network and joint are stored as float16 too (NeMo restores them as float32: ``load_state_dict``
converts); with ``--int8`` the encoder's weight matrices are stored as int8 with per-channel scales
(``WhisperEncoder.int8_weights``), which brings the file from ~33 MB to ~18 MB. ``--ckpt`` may be left out to
re-export ``--init`` itself (e.g. an existing ``.nemo`` in another storage format). A compact checkpoint
(trained weights only, e.g. from ``python -m training.plain join``) takes the frozen Whisper weights from
``--init``.

Usage::

    python -m training.export --init training/work/init.nemo --ckpt training/work/run1/ckpt.pt \
        --out models/captions-embedded.nemo
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from omegaconf import open_dict

import captions_model.nemo_encoder  # noqa: F401 - registers our _target_ prefixes with NeMo
from training.checkpoint import load_trained
from training.features import load_model
from training.model import VALIDATION_DS


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--init", type=Path, required=True)
    parser.add_argument("--ckpt", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--half", action="store_true", help="store prediction net and joint as float16")
    parser.add_argument("--int8", action="store_true", help="store the encoder's weight matrices as int8")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.init)
    ckpt = {"step": None, "seen_s": float("nan")}
    if args.ckpt:
        ckpt = torch.load(args.ckpt, map_location="cpu")
        load_trained(model, ckpt)
    if "validation_ds" not in model.cfg:  # models built before VALIDATION_DS existed
        with open_dict(model.cfg):
            model.cfg.validation_ds = VALIDATION_DS
    with open_dict(model.cfg):
        model.cfg.encoder.int8_weights = args.int8
    model.encoder.int8_weights = args.int8
    if args.half:
        model.decoder.half()
        model.joint.half()
    tmp = args.out.with_name(args.out.name + ".tmp.nemo")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    model.save_to(str(tmp))
    tmp.replace(args.out)
    size_mb = args.out.stat().st_size / 1e6
    print(
        f"wrote {args.out} ({size_mb:.1f} MB) from step {ckpt['step']} ({ckpt['seen_s'] / 3600:.1f} audio-h)"
    )


if __name__ == "__main__":
    main()
