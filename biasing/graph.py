"""The compiled boosting graph: immutable arrays in the layout of NeMo 3.0.0's boosting-tree model.

Scoring contract (TurboBias 2.0, section 1), for CASE_INSENSITIVE and CHAR graphs:
- states are the case-folded character prefixes of the phrases' chains ("▁linezolid"); the root is "";
- an arc labelled by token t goes from prefix p to prefix p + fold(t) and scores potential(to) -
  potential(from), so every casing and segmentation reaching a state earns the same total. A phrase gives
  the character after which its k-th greedy (folded) token ends NeMo's tree score of tokens 0..k, and the
  characters inside token k a ``tau``-share of token k's own score (``GraphParams``): on the greedy
  segmentation the graph scores every token exactly as the lowercase tree does, and other casings and
  segmentations earn the same at each greedy token end. A bare "▁" greedy piece counts as part of the next
  token when some label spells "▁" and that token's first character together (the model says ``▁U`` where
  SentencePiece spells "uvelol" ``▁ u``); otherwise it is a token of its own, as in the tree. A prefix's
  potential is the largest any phrase through it (or through a shorter prefix of it) gives at that depth;
- a token with no arc backs off along the suffix links (Aho-Corasick on characters; the state after every
  token is the longest suffix of the emitted text that is a prefix). Backing off from s scores
  ``potential(fail(s)) - potential(s) + banked(s)``: a failed partial match is refunded exactly, and
  ``banked(s)`` keeps the best complete phrase matched inside s (as a prefix, or inside it and not wholly
  within fail(s), which goes on scoring it). Overlapping phrases therefore both score in full.
CASE_SENSITIVE_TREE reproduces NeMo's own tree (TurboBias 1.0): token trie, NeMo's token scores, and end
states backing off for free.

A phrase ends at a word boundary (issue 35), in every mode: a completed phrase counts only when the next
label starts a new word (a ``▁`` piece, punctuation, an apostrophe) or the utterance ends. A label that goes
on spelling the same word ("halvorsen" + "ed": ``label_continues_word``) and backs off from a state refunds
that state's ``word_end_refund`` too: what it banks for a phrase ending exactly there, so "halvorsened" earns
what a failed partial match earns (nothing). A phrase matched inside a longer chain is banked only where the
chain goes on with a boundary ("new" inside "new york", not "halvorsen" inside "halvorsens"). The runtime
rule lives in ``biasing.scorer`` and ``biasing.nemo.multi_model`` (NeMo 3.0.0's own advance knows nothing of
it: without the refund the arrays still score as before).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

COMPILER_VERSION = "turbobias2-graph-3"  # 2: potentials per greedy token (issue 25); 3: word ends (35)
__all__ = [
    "ALL_ARRAYS",
    "COMPILER_VERSION",
    "BoostingGraph",
    "GraphMode",
    "GraphParams",
    "GraphValidationError",
    "validate_arrays",
]


class GraphMode(enum.Enum):
    """How phrases become a graph."""

    CASE_INSENSITIVE = "case_insensitive"  # variative BPE DAG over the folded character chain (default)
    CASE_SENSITIVE_TREE = "case_sensitive_tree"  # NeMo 3.0.0's tree from one greedy tokenization per phrase
    CHAR = "char"  # character models: one arc per case variant of each character, no multi-character jumps


@dataclass(frozen=True)
class GraphParams:
    """Graph construction parameters.

    ``context_score`` / ``depth_scaling`` follow NeMo's ``ContextGraph``: a phrase whose greedy (folded)
    tokenization has m tokens scores ``w = weight * (cs + sum_{i=1..m-1} (cs * depth_scaling + ln(i + 1)))``.
    The k-th token's score ``w_k`` is spread over ITS n_k characters (TurboBias 2.0's ``Delta_{k,i}``):
    ``w_k * exp((i+1)^tau) / sum_j exp((j+1)^tau)``, j < n_k (0 = evenly over the token; large = all at the
    token's last character, i.e. NeMo's tree, "score at BPE end"). ``final_eos_score`` is the final weight of
    phrase ends (used by NeMo only for AED eos).
    """

    mode: GraphMode = GraphMode.CASE_INSENSITIVE
    tau: float = 2.0  # the service default (CAPTIONS_BIASING_TAU), tuned on the dev sets (issue 25)
    context_score: float = 1.0
    depth_scaling: float = 2.0
    final_eos_score: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.mode, GraphMode):
            raise ValueError(f"mode must be a GraphMode, got {self.mode!r}")
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name != "mode" and (not isinstance(value, int | float) or not math.isfinite(value)):
                raise ValueError(f"{item.name} must be a finite number, got {value!r}")
        if self.tau < 0 or self.tau > 8:
            raise ValueError(f"tau must be in [0, 8], got {self.tau}")
        if self.context_score <= 0 or self.depth_scaling < 0:
            raise ValueError("context_score must be > 0 and depth_scaling >= 0")

    def identity(self) -> dict[str, Any]:
        """A JSON-able description (part of a vocabulary's cache key)."""
        return {f.name: getattr(self, f.name) if f.name != "mode" else self.mode.value for f in fields(self)}


class GraphValidationError(ValueError):
    """The arrays violate an invariant NeMo's runtime relies on without checking."""


ARC_ARRAYS = ("arc_from", "arc_to", "arc_label", "arc_weight")
STATE_ARRAYS = (
    "state_arcs_start",
    "state_arcs_end",
    "state_order",
    "backoff_to",
    "backoff_weight",
    "final_weight",
    "potential",
    "is_end",
    "word_end_refund",
)
LABEL_ARRAYS = ("label_continues_word",)
ALL_ARRAYS = (*ARC_ARRAYS, *STATE_ARRAYS, *LABEL_ARRAYS)


@dataclass(frozen=True, eq=False)
class BoostingGraph:
    """A compiled graph (read-only arrays). Arcs are sorted by (from, label); state 0 is the root/start state.

    Arc arrays have length ``num_arcs``; state arrays ``num_states``; ``label_continues_word`` has
    ``vocab_size`` entries (True: the label goes on spelling the word before it). ``potential`` and ``is_end``
    are for inspection and rendering; NeMo needs the arcs, back-offs and final weights; our runtimes also
    apply ``word_end_refund`` to labels that continue a word.
    """

    vocab_size: int
    max_order: int
    mode: GraphMode
    arc_from: np.ndarray
    arc_to: np.ndarray
    arc_label: np.ndarray
    arc_weight: np.ndarray
    state_arcs_start: np.ndarray
    state_arcs_end: np.ndarray
    state_order: np.ndarray
    backoff_to: np.ndarray
    backoff_weight: np.ndarray
    final_weight: np.ndarray
    potential: np.ndarray
    is_end: np.ndarray
    word_end_refund: np.ndarray
    label_continues_word: np.ndarray

    def __post_init__(self) -> None:
        for name in ALL_ARRAYS:
            getattr(self, name).flags.writeable = False

    @property
    def num_states(self) -> int:
        return int(self.state_order.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.arc_from.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays (what a memory cache holds for this graph)."""
        return sum(getattr(self, name).nbytes for name in ALL_ARRAYS)

    def arrays(self) -> dict[str, np.ndarray]:
        """All arrays by field name (for serialisation)."""
        return {name: getattr(self, name) for name in ALL_ARRAYS}

    def validate(self) -> None:
        """Raise ``GraphValidationError`` unless every invariant NeMo relies on holds."""
        validate_arrays(self)

    def arcs_of(self, state: int) -> dict[int, tuple[int, float]]:
        """Outgoing arcs of ``state`` as {label: (to, weight)} (for inspection and tests)."""
        start, end = int(self.state_arcs_start[state]), int(self.state_arcs_end[state])
        return {
            int(self.arc_label[i]): (int(self.arc_to[i]), float(self.arc_weight[i]))
            for i in range(start, end)
        }


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise GraphValidationError(message)


def _validate_arcs(graph: BoostingGraph) -> None:
    num_states, vocab_size = graph.num_states, graph.vocab_size
    arc_from, arc_label = graph.arc_from.astype(np.int64), graph.arc_label.astype(np.int64)
    _check(all(getattr(graph, n).shape == arc_from.shape for n in ARC_ARRAYS), "arc arrays differ in length")
    _check(bool(((arc_label >= 0) & (arc_label < vocab_size)).all()), "arc label outside the vocabulary")
    for name in ("arc_from", "arc_to"):
        values = getattr(graph, name)
        _check(bool(((values >= 0) & (values < num_states)).all()), f"{name} outside the state range")
    _check(bool(np.isfinite(graph.arc_weight).all()), "non-finite arc weight")
    keys = arc_from * vocab_size + arc_label
    if keys.size > 1:
        steps = np.diff(keys)
        duplicate = np.flatnonzero(steps == 0)
        _check(
            duplicate.size == 0,
            f"duplicate label on state {arc_from[duplicate[0]] if duplicate.size else -1}",
        )
        _check(bool((steps > 0).all()), "arcs are not sorted by (from state, label)")
    counts = np.bincount(arc_from, minlength=num_states)
    starts = np.searchsorted(arc_from, np.arange(num_states), side="left")
    declared_start = graph.state_arcs_start.astype(np.int64)
    declared_end = graph.state_arcs_end.astype(np.int64)
    has_arcs = counts > 0
    _check(bool((declared_end - declared_start == counts).all()), "state arc ranges do not match the arcs")
    _check(bool((declared_start[has_arcs] == starts[has_arcs]).all()), "state arc ranges are not contiguous")
    root_labels = arc_label[declared_start[0] : declared_end[0]]
    _check(
        root_labels.size == vocab_size and bool((root_labels == np.arange(vocab_size)).all()),
        "the root state must have exactly one arc for every label",
    )


def _validate_backoff(graph: BoostingGraph) -> None:
    num_states = graph.num_states
    backoff = graph.backoff_to.astype(np.int64)
    _check(bool(((backoff >= 0) & (backoff < num_states)).all()), "backoff state outside the state range")
    _check(int(backoff[0]) == 0, "the root must back off to itself")
    _check(bool(np.isfinite(graph.backoff_weight).all()), "non-finite backoff weight")
    refund = graph.word_end_refund
    _check(bool(np.isfinite(refund).all() and (refund >= 0).all()), "word-end refunds must be finite, >= 0")
    order = graph.state_order.astype(np.int64)
    _check(bool(order[0] == 1 and (order >= 1).all()), "state order must be >= 1 and 1 at the root")
    _check(bool((order <= graph.max_order).all()), "state order above max_order")
    # NeMo's advance visits at most max_order states per query; a cycle would never reach the root.
    current = np.arange(num_states)
    for _ in range(graph.max_order):
        current = backoff[current]
    stuck = np.flatnonzero(current != 0)
    _check(stuck.size == 0, f"backoff chain of state {stuck[0] if stuck.size else -1} never reaches the root")


def validate_arrays(graph: BoostingGraph) -> None:
    """Check NeMo's unchecked invariants: one root arc per label, at most one arc per label per state,
    contiguous sorted arcs, backoff chains acyclic and ending at the root within ``max_order`` steps."""
    _check(graph.num_states >= 1, "a graph needs a root state")
    lengths = {getattr(graph, name).shape for name in STATE_ARRAYS}
    _check(len(lengths) == 1, "state arrays differ in length")
    _check(graph.label_continues_word.shape == (graph.vocab_size,), "one word-continuation flag per label")
    _validate_arcs(graph)
    _validate_backoff(graph)
