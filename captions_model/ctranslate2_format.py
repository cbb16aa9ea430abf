"""Read a CTranslate2 ``model.bin`` (binary version 6) into numpy arrays, without CTranslate2.

CTranslate2 has no API to read weights back, so this parses the binary format its writer
(``ctranslate2/specs/model_spec.py``, little-endian) produces: a header, named variables (name, shape,
dtype, raw bytes) and aliases. Used by the Whisper encoder conversion (``training/convert_whisper.py``) and
the final-pass export (``scripts/export_final_pass.py``).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

__all__ = ["read_ctranslate2"]

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
