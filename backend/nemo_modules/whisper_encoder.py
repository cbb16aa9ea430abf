"""Whisper's audio encoder as a NeMo encoder module, at NeMo's usual 80 ms frame rate.

The embedded default model (``models/captions-embedded.nemo``) is a NeMo RNNT model whose encoder is this
module; its weights start from Whisper tiny.en (MIT licence, converted by ``training/convert_whisper.py``) and
travel inside the ``.nemo``, so nothing but this package is needed to restore it.

The layers and the computation are ``backend.whisper_core.WhisperCore`` (plain PyTorch, documented there);
this class adds NeMo's typed-module interface, which ``EncDecRNNTBPEModel`` needs, and keeps the name that
the shipped ``.nemo`` configs give as ``_target_``.
"""

from __future__ import annotations

from nemo.core.classes import NeuralModule, typecheck
from nemo.core.neural_types import AcousticEncodedRepresentation, LengthsType, NeuralType, SpectrogramType
from torch import Tensor

from backend.whisper_core import WhisperCore

__all__ = ["WhisperEncoder"]


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
