"""NeMo neural modules of our own, referenced by ``_target_`` from the shipped ``.nemo`` model configs.

NeMo 3.0.0 instantiates a config ``_target_`` only under an allow-list of prefixes
(``nemo.core.classes.common.ALLOWED_TARGET_PREFIXES``); importing this package adds ours, so
``ASRModel.restore_from("models/captions-embedded.nemo")`` works after ``import backend.nemo_modules``.
"""

from nemo.core.classes import common as _nemo_common

from backend.nemo_modules.whisper_encoder import WhisperEncoder

__all__ = ["TARGET_PREFIX", "WhisperEncoder"]

TARGET_PREFIX = "backend.nemo_modules."

if TARGET_PREFIX not in _nemo_common.ALLOWED_TARGET_PREFIXES:
    _nemo_common.ALLOWED_TARGET_PREFIXES.append(TARGET_PREFIX)
