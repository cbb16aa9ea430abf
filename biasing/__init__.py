"""Context biasing (TurboBias 2.0) as a pure library: terms, graph compiler, NeMo adapter, registry.

Imports nothing from the web or database layers. ``biasing.nemo.compat`` (and the registry) import NeMo.
"""

from biasing.graph import (
    COMPILER_VERSION,
    BoostingGraph,
    GraphMode,
    GraphParams,
    GraphValidationError,
    build_graph,
    find_matches,
)
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
