"""Make the resume checkpoint that is committed to the repository (``training/checkpoint/ckpt.pt``) compact.

A training checkpoint (``<work>/ckpt.pt``) holds the whole model, full precision, and AdamW's two moments
for every trained parameter: ~140 MB for the 4-block head. The committed copy drops the frozen Whisper
encoder weights (``--init`` supplies them again on resume) and stores the optimizer moments as bfloat16
(``torch.optim.Optimizer.load_state_dict`` casts them back to float32): ~70 MB, under the 100 MB a git
host accepts per file. ``training.train`` resumes from either kind.

Usage::

    python -m training.checkpoint --ckpt training/work/run3/ckpt.pt --out training/checkpoint/ckpt.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

TRAINED_PREFIXES = ("encoder.proj.", "encoder.top.", "decoder.", "joint.")


def is_frozen(key: str) -> bool:
    """A state-dict key of the frozen Whisper encoder (not stored in a compact checkpoint)."""
    return key.startswith("encoder.") and not key.startswith(TRAINED_PREFIXES)


def load_trained(model: torch.nn.Module, ckpt: dict) -> None:
    """Load a training checkpoint's weights into ``model``: all of them, or, from a compact checkpoint, all
    but the frozen Whisper weights (which ``model`` already has from its ``--init``)."""
    missing, unexpected = model.load_state_dict(ckpt["model"], strict=False)
    if unexpected or (missing and not ckpt.get("compact")) or not all(is_frozen(k) for k in missing):
        raise RuntimeError(f"checkpoint does not fit: missing={missing} unexpected={unexpected}")


def compact(ckpt: dict) -> dict:
    model = {k: v for k, v in ckpt["model"].items() if not is_frozen(k)}
    opt = {"param_groups": ckpt["opt"]["param_groups"], "state": {}}
    for index, state in ckpt["opt"]["state"].items():
        opt["state"][index] = {
            name: value.to(torch.bfloat16) if name.startswith("exp_avg") else value
            for name, value in state.items()
        }
    return {**ckpt, "model": model, "opt": opt, "compact": True}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    small = compact(torch.load(args.ckpt, map_location="cpu"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    torch.save(small, tmp)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {args.out.stat().st_size / 1e6:.1f} MB, step {small['step']}")


if __name__ == "__main__":
    main()
