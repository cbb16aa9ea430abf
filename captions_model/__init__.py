"""The bundled speech model's code: where its files are, and the layers its ``.nemo`` config names.

- ``captions_model.paths``: the bundled model and LM files and the ``auto`` LM rule (no heavy imports).
- ``captions_model.whisper_core``: Whisper's audio encoder in plain PyTorch (no NeMo), used by training too.
- ``captions_model.nemo_encoder``: the same encoder as a NeMo module; importing it lets NeMo instantiate our
  ``_target_`` names (the shipped ``.nemo`` files name the old path ``backend.nemo_modules.whisper_encoder``,
  kept as a shim).

Importing this package imports neither torch nor NeMo.
"""
