"""Graph compilation in a worker process, so that a large list never holds the decode process's GIL.

``compile_arrays`` is the function a ``ProcessPoolExecutor`` runs: it receives the tokenizer as its serialized
SentencePiece model (adapters are cached per model in the worker) and returns plain arrays, which the parent
turns back into a read-only ``BoostingGraph``. Imports neither NeMo nor torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import sentencepiece as spm

from biasing.compile import build_graph
from biasing.graph import BoostingGraph, GraphMode, GraphParams
from biasing.terms import Term
from biasing.tokenizer import TokenizerAdapter

_ADAPTERS: dict[str, TokenizerAdapter] = {}  # per worker process: model digest -> adapter


def compile_arrays(
    model_proto: bytes, vocab_size: int, terms: Sequence[Term], params: GraphParams
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Build and validate the graph; returns (arrays, scalars) for ``graph_from_arrays``."""
    digest = hashlib.sha256(model_proto).hexdigest() + f"|{vocab_size}"
    adapter = _ADAPTERS.get(digest)
    if adapter is None:
        adapter = TokenizerAdapter(spm.SentencePieceProcessor(model_proto=model_proto), vocab_size)
        _ADAPTERS.clear()
        _ADAPTERS[digest] = adapter
    graph = build_graph(terms, adapter, params)
    scalars = {"vocab_size": graph.vocab_size, "max_order": graph.max_order, "mode": graph.mode.value}
    return graph.arrays(), scalars


def graph_from_arrays(arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> BoostingGraph:
    """The read-only graph of ``compile_arrays``'s result (validated again after crossing processes)."""
    graph = BoostingGraph(
        vocab_size=int(scalars["vocab_size"]),
        max_order=int(scalars["max_order"]),
        mode=GraphMode(scalars["mode"]),
        **arrays,
    )
    graph.validate()
    return graph
