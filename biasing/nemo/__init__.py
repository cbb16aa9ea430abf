"""The NeMo adapter of ``biasing``: compiled graphs as NeMo 3.0.0 boosting-tree models, the sparse-advance
multi-model, and the registry that leases per-stream model ids in a decoder's ``GPUBiasingMultiModel``.

The only part of ``biasing`` that imports torch and NeMo; everything above it is numpy and SentencePiece.
"""
