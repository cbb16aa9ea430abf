"""Compatibility shim: the shipped ``.nemo`` files name
``backend.nemo_modules.whisper_encoder.WhisperEncoder`` as their encoder's ``_target_``. The code lives in
``captions_model.nemo_encoder``; keep this path for as long as such files exist."""

from captions_model.nemo_encoder import LEGACY_TARGET_PREFIX as TARGET_PREFIX
from captions_model.nemo_encoder import WhisperEncoder

__all__ = ["TARGET_PREFIX", "WhisperEncoder"]
