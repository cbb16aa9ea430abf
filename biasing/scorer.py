"""Applying a compiled ``BoostingGraph`` to a token-by-token search, in pure numpy (no torch, no NeMo).

The semantics are NeMo 3.0.0's ``NGramGPULanguageModel._advance_pytorch`` (which ``GPUBoostingTreeModel`` and
``GPUBiasingMultiModel`` use, and ``biasing.nemo.multi_model`` reproduces sparsely): from state ``s`` the
label ``t`` is looked up on ``s``, then on ``backoff_to[s]``, ... down to the root (which has an arc for every
label); the first state on that chain with an arc for ``t`` wins, scoring the arc's weight plus the
``backoff_weight`` of every state left before it, and moving to the arc's target. At the end of an utterance
NeMo's AED decoding (``GPUBoostingTreeModel.advance(states, eos_id)``, used by Canary's beam search) gives the
end-of-sequence token ``max(0, max_t score(s, t)) + final_weight[s]`` and keeps the state: ``final_score``
(``end="nemo"``, the default). NeMo never refunds a partial match at the end; ``end="refund"`` does instead:
``final_score`` is then what backing off from ``s`` to the root scores (minus the unfinished part of a phrase,
0 after a complete one) plus ``final_weight[s]``. Every score is multiplied by ``alpha`` (NeMo's
``fusion_models_alpha``), in float32 like NeMo.

Word ends (``biasing.graph``): a label that continues the word (``label_continues_word``) and backs off from a
state also pays that state's ``word_end_refund``, so a phrase followed by more letters of the same word earns
what a failed partial match earns. The end of the utterance is a word end.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Literal

import numpy as np

from biasing.graph import BoostingGraph

__all__ = ["GraphScorer"]


class GraphScorer:
    """Dense per-state boosts of a compiled graph for a beam search (the ``Booster`` protocol:
    ``initial_state``, ``scores``, ``final_score``).

    ``scores(state)`` returns ``(boost, next_state)``: float32 ``[vocab_size]`` already times ``alpha`` and
    int64 ``[vocab_size]``; both read-only and cached per state (LRU, ``cache_size`` rows). With ``eos_id``
    the row's ``eos_id`` entry is NeMo's end-of-sequence score (``final_score(state)``, staying in ``state``),
    exactly as ``advance(states, eos_id)``; a search that does so must not add ``final_score`` again. Without
    it, the end-of-sequence label is an ordinary label (it spells nothing, so it backs off to the root,
    refunding a partial match) and a search adds ``final_score`` when a hypothesis ends.
    """

    def __init__(
        self,
        graph: BoostingGraph,
        alpha: float,
        *,
        eos_id: int | None = None,
        cache_size: int = 128,
        end: Literal["nemo", "refund"] = "nemo",
    ) -> None:
        if eos_id is not None and not 0 <= eos_id < graph.vocab_size:
            raise ValueError(f"eos_id {eos_id} is outside the vocabulary of {graph.vocab_size} labels")
        if end not in ("nemo", "refund"):
            raise ValueError(f"end must be 'nemo' or 'refund', got {end!r}")
        if cache_size < 1:
            raise ValueError("cache_size must be >= 1")
        self.graph = graph
        self.alpha = float(alpha)
        self.eos_id = eos_id
        self.end = end
        self.vocab_size = graph.vocab_size
        self._alpha32 = np.float32(alpha)
        self._starts = graph.state_arcs_start.astype(np.int64)
        self._ends = graph.state_arcs_end.astype(np.int64)
        self._labels = graph.arc_label.astype(np.int64)
        self._targets = graph.arc_to.astype(np.int64)
        self._weights = graph.arc_weight.astype(np.float32)
        self._backoff_to = graph.backoff_to.astype(np.int64).tolist()
        self._backoff_weight = graph.backoff_weight.astype(np.float32)
        self._refund = graph.word_end_refund.astype(np.float32)
        self._continues = graph.label_continues_word.astype(bool)
        self._final = graph.final_weight.astype(np.float32)
        root = slice(int(self._starts[0]), int(self._ends[0]))
        if not np.array_equal(self._labels[root], np.arange(self.vocab_size)):
            raise ValueError("the graph's root state must have exactly one arc per label, in label order")
        self._root_weights = self._weights[root]
        self._root_targets = self._targets[root]
        self._max_hops = max(int(graph.max_order), 1)
        self._cache: OrderedDict[int, tuple[np.ndarray, np.ndarray, float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def initial_state(self) -> int:
        """The root (NeMo's start state; a boosting graph's BOS state is the root too)."""
        return 0

    def _chain(self, state: int) -> tuple[list[tuple[int, np.float32, np.float32]], np.float32, np.float32]:
        """The non-root states on ``state``'s back-off chain, each with the back-off weight and the word-end
        refund accumulated before it, and both totals on reaching the root (float32, in NeMo's order)."""
        if not 0 <= state < self.graph.num_states:
            raise ValueError(f"state {state} is outside the graph's {self.graph.num_states} states")
        chain: list[tuple[int, np.float32, np.float32]] = []
        accumulated = refunded = np.float32(0.0)
        current = state
        while current != 0:
            if len(chain) >= self._max_hops:
                raise ValueError(f"the back-off chain of state {state} does not reach the root")
            chain.append((current, accumulated, refunded))
            accumulated = np.float32(accumulated + self._backoff_weight[current])
            refunded = np.float32(refunded + self._refund[current])
            current = self._backoff_to[current]
        return chain, accumulated, refunded

    def _row(self, state: int) -> tuple[np.ndarray, np.ndarray, float]:
        chain, accumulated, refunded = self._chain(state)
        continues = self._continues
        raw = self._root_weights + accumulated - np.where(continues, refunded, np.float32(0.0))
        next_state = self._root_targets.copy()
        for node, before, refund_before in reversed(chain):  # deepest back-off first: nearer states overwrite
            start, end = int(self._starts[node]), int(self._ends[node])
            if start == end:
                continue
            labels = self._labels[start:end]
            paid = np.where(continues[labels], refund_before, np.float32(0.0))
            raw[labels] = self._weights[start:end] + before - paid
            next_state[labels] = self._targets[start:end]
        if self.end == "nemo":
            final = float(np.float32(max(np.float32(0.0), raw.max()) + self._final[state]) * self._alpha32)
        else:
            final = float(np.float32(accumulated + self._final[state]) * self._alpha32)
        boost = (raw * self._alpha32).astype(np.float32, copy=False)
        if self.eos_id is not None:
            boost[self.eos_id] = final
            next_state[self.eos_id] = state
        boost.flags.writeable = False
        next_state.flags.writeable = False
        return boost, next_state, final

    def _cached(self, state: int) -> tuple[np.ndarray, np.ndarray, float]:
        with self._lock:
            hit = self._cache.get(state)
            if hit is not None:
                self._cache.move_to_end(state)
                return hit
        row = self._row(state)
        with self._lock:
            self._cache[state] = row
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return row

    def scores(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """``(boost, next_state)`` for every label from ``state``: float32 times ``alpha``, and int64."""
        boost, next_state, _ = self._cached(int(state))
        return boost, next_state

    def final_score(self, state: int) -> float:
        """``end="nemo"``: ``alpha * (max(0, max_t score(state, t)) + final_weight[state])``, what NeMo's AED
        decoding gives the end-of-sequence token in ``state`` (scores as in ``scores`` without ``eos_id``);
        ``end="refund"``: ``alpha * (back-off weights from state to the root + final_weight[state])``."""
        return self._cached(int(state))[2]

    def step(self, state: int, label: int) -> tuple[float, int]:
        """One label's ``(boost, next_state)`` without building the dense row (same values as ``scores``)."""
        if not 0 <= label < self.vocab_size:
            raise ValueError(f"label {label} is outside the vocabulary of {self.vocab_size} labels")
        if self.eos_id is not None and label == self.eos_id:
            return self.final_score(state), int(state)
        chain, accumulated, refunded = self._chain(int(state))
        continues = bool(self._continues[label])
        for node, before, refund_before in chain:
            start, end = int(self._starts[node]), int(self._ends[node])
            position = start + int(np.searchsorted(self._labels[start:end], label))
            if position < end and self._labels[position] == label:
                paid = refund_before if continues else np.float32(0.0)
                score = np.float32(self._weights[position] + before - paid) * self._alpha32
                return float(score), int(self._targets[position])
        paid = refunded if continues else np.float32(0.0)
        score = np.float32(self._root_weights[label] + accumulated - paid) * self._alpha32
        return float(score), int(self._root_targets[label])

    def score_sequence(self, tokens: Iterable[int], final: bool = False, state: int = 0) -> float:
        """The summed boost of ``tokens`` from ``state`` (the root by default); ``final``: plus
        ``final_score`` of the state reached (the hypothesis ends there)."""
        total = 0.0
        for label in tokens:
            score, state = self.step(state, int(label))
            total += score
        if final:
            total += self.final_score(state)
        return total

    def state_after(self, tokens: Iterable[int], state: int = 0) -> int:
        """The state reached after ``tokens`` from ``state``."""
        for label in tokens:
            state = self.step(state, int(label))[1]
        return state
