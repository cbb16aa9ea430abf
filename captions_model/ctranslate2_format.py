"""Read a CTranslate2 ``model.bin`` (binary version 6) into numpy arrays, without CTranslate2.

CTranslate2 has no API to read weights back, so this parses the binary format its writer
(``ctranslate2/specs/model_spec.py``, little-endian) produces: a header, named variables (name, shape,
dtype, raw bytes) and aliases. Used by the Whisper encoder conversion (``training/convert_whisper.py``) and
the final-pass export (``scripts/export_final_pass.py``), which share the encoder's key mapping
(``whisper_encoder_state``).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

__all__ = ["layer_norm", "linear", "read_ctranslate2", "tensor", "whisper_encoder_state"]

_DTYPES: dict[int, type[np.generic]] = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def _read_str(f: BinaryIO) -> str:
    """A length-prefixed (uint16), NUL-terminated UTF-8 string."""
    (n,) = struct.unpack("<H", f.read(2))
    return f.read(n)[:-1].decode("utf-8")


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """Return every variable of a CTranslate2 model file (version 6) as a numpy array, aliases resolved."""
    out: dict[str, np.ndarray] = {}
    with Path(path).open("rb") as f:
        (version,) = struct.unpack("<I", f.read(4))
        if version != 6:
            raise ValueError(f"expected CTranslate2 binary version 6, got {version}")
        _read_str(f)  # model spec name
        struct.unpack("<I", f.read(4))  # spec revision
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


def tensor(variables: dict[str, np.ndarray], name: str) -> torch.Tensor:
    """One variable as a float32 tensor."""
    return torch.from_numpy(np.array(variables[name], dtype=np.float32))


def layer_norm(variables: dict[str, np.ndarray], src: str, dst: str) -> dict[str, torch.Tensor]:
    """A CTranslate2 layer norm (``gamma``/``beta``) as ``nn.LayerNorm`` keys under ``dst``."""
    return {
        f"{dst}.weight": tensor(variables, f"{src}/gamma"),
        f"{dst}.bias": tensor(variables, f"{src}/beta"),
    }


def linear(variables: dict[str, np.ndarray], src: str, dst: str) -> dict[str, torch.Tensor]:
    """A CTranslate2 linear or convolution (weights already [out, in, ...]) as module keys under ``dst``."""
    return {
        f"{dst}.weight": tensor(variables, f"{src}/weight"),
        f"{dst}.bias": tensor(variables, f"{src}/bias"),
    }


def whisper_encoder_state(
    variables: dict[str, np.ndarray], prefix: str = ""
) -> tuple[dict[str, torch.Tensor], int]:
    """Whisper's ``encoder/...`` variables under the keys of ``captions_model.whisper_core.WhisperCore``'s
    Whisper part (``conv1``, ``conv2``, ``blocks.i.{attn_ln,qkv,out,mlp_ln,fc1,fc2}``, ``ln_post``), each
    behind ``prefix``; and the number of blocks."""
    v = variables
    sd: dict[str, torch.Tensor] = {}
    sd.update(linear(v, "encoder/conv1", f"{prefix}conv1"))
    sd.update(linear(v, "encoder/conv2", f"{prefix}conv2"))
    sd.update(layer_norm(v, "encoder/layer_norm", f"{prefix}ln_post"))
    n_layers = 0
    while f"encoder/layer_{n_layers}/ffn/linear_0/weight" in v:
        src, dst = f"encoder/layer_{n_layers}", f"{prefix}blocks.{n_layers}"
        sd.update(layer_norm(v, f"{src}/self_attention/layer_norm", f"{dst}.attn_ln"))
        sd.update(linear(v, f"{src}/self_attention/linear_0", f"{dst}.qkv"))
        sd.update(linear(v, f"{src}/self_attention/linear_1", f"{dst}.out"))
        sd.update(layer_norm(v, f"{src}/ffn/layer_norm", f"{dst}.mlp_ln"))
        sd.update(linear(v, f"{src}/ffn/linear_0", f"{dst}.fc1"))
        sd.update(linear(v, f"{src}/ffn/linear_1", f"{dst}.fc2"))
        n_layers += 1
    return sd, n_layers
