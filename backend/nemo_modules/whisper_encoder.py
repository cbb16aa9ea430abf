"""Shim for the ``_target_`` that the shipped ``.nemo`` files store: see ``backend.nemo_modules``."""

from captions_model.nemo_encoder import WhisperEncoder

__all__ = ["WhisperEncoder"]
