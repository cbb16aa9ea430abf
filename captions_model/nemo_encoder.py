"""Whisper's audio encoder as a NeMo encoder module, at NeMo's usual 80 ms frame rate.

The embedded default model (``models/captions-embedded.nemo``) is a NeMo RNNT model whose encoder is this
module; its weights start from Whisper tiny.en (MIT licence, converted by ``training/convert_whisper.py``) and
travel inside the ``.nemo``, so nothing but this package is needed to restore it.

The layers and the computation are ``captions_model.whisper_core.WhisperCore`` (plain PyTorch, documented
there); this class adds NeMo's typed-module interface, which ``EncDecRNNTBPEModel`` needs.

NeMo 3.0.0 instantiates a config ``_target_`` only under an allow-list of prefixes
(``nemo.core.classes.common.ALLOWED_TARGET_PREFIXES``). Importing this module adds ours: this package's, and
``backend.nemo_modules.``, the name that the shipped ``.nemo`` configs give as ``_target_``
(``backend.nemo_modules.whisper_encoder.WhisperEncoder``, a shim that re-exports this class). So
``ASRModel.restore_from("models/captions-embedded.nemo")`` works after ``import captions_model.nemo_encoder``.
"""

from __future__ import annotations

import warnings

import torch
from nemo.core.classes import NeuralModule, typecheck
from nemo.core.classes import common as _nemo_common
from nemo.core.neural_types import AcousticEncodedRepresentation, LengthsType, NeuralType, SpectrogramType
from torch import Tensor

from captions_model.whisper_core import WhisperCore

__all__ = ["LEGACY_TARGET_PREFIX", "TARGET", "TARGET_PREFIX", "WhisperEncoder", "quantize_encoder"]

TARGET_PREFIX = "captions_model."
LEGACY_TARGET_PREFIX = "backend.nemo_modules."
TARGET = "captions_model.nemo_encoder.WhisperEncoder"
"""The ``_target_`` new models get (the shipped ones name the old path under ``LEGACY_TARGET_PREFIX``)."""

for _prefix in (TARGET_PREFIX, LEGACY_TARGET_PREFIX):
    if _prefix not in _nemo_common.ALLOWED_TARGET_PREFIXES:
        _nemo_common.ALLOWED_TARGET_PREFIXES.append(_prefix)


class WhisperEncoder(NeuralModule, WhisperCore):
    """``WhisperCore`` as a NeMo encoder (same arguments, state-dict keys and shapes).

    ``NeuralModule`` defines no ``__init__``, so construction runs ``WhisperCore.__init__``.
    """

    @property
    def input_types(self) -> dict[str, NeuralType]:
        return {
            "audio_signal": NeuralType(("B", "D", "T"), SpectrogramType()),
            "length": NeuralType(tuple("B"), LengthsType()),
        }

    @property
    def output_types(self) -> dict[str, NeuralType]:
        return {
            "outputs": NeuralType(("B", "D", "T"), AcousticEncodedRepresentation()),
            "encoded_lengths": NeuralType(tuple("B"), LengthsType()),
        }

    @typecheck()
    def forward(self, audio_signal: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        return WhisperCore.forward(self, audio_signal, length)


def quantize_encoder(encoder: WhisperEncoder) -> WhisperEncoder:
    """``encoder`` with its ``nn.Linear`` layers dynamically quantized to int8 (PyTorch eager, CPU): the
    attention and feed-forward matrices of the Whisper and trained blocks and the frame projection; the
    convolutions stay float32. In place, returned for convenience."""
    with warnings.catch_warnings():  # eager-mode quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(encoder, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    return encoder
