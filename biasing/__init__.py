"""Context biasing (TurboBias 2.0) as a pure library: terms, tokenizer adapter, graph compiler, matching.

The modules here import numpy and SentencePiece only: nothing from the web or database layers, no torch, no
NeMo. ``biasing.nemo`` is the adapter to NeMo 3.0.0 (graphs as boosting-tree models, the registry of
per-stream model ids in a decoder's multi-model); it is the one part that imports torch and NeMo.
"""

from biasing.compile import build_graph
from biasing.graph import (
    COMPILER_VERSION,
    BoostingGraph,
    GraphMode,
    GraphParams,
    GraphValidationError,
)
from biasing.matching import find_matches
from biasing.terms import Term, TermError, TermLimits, TermValidationError, normalize_terms

__all__ = [
    "COMPILER_VERSION",
    "BoostingGraph",
    "GraphMode",
    "GraphParams",
    "GraphValidationError",
    "Term",
    "TermError",
    "TermLimits",
    "TermValidationError",
    "build_graph",
    "find_matches",
    "normalize_terms",
]
