"""Graph construction: phrases -> trie -> potentials, suffix links and arcs -> ``BoostingGraph`` arrays.

Two builders share one array assembly:
- the variative graph (CASE_INSENSITIVE and CHAR): a trie over case-folded characters, with an arc for every
  vocabulary label whose folded surface spells a contiguous span of a phrase's chain;
- the tree (CASE_SENSITIVE_TREE): a trie over the greedy token ids, scored exactly like NeMo 3.0.0's
  ``ContextGraph`` + ``GPUBoostingTreeModel.from_context_graph`` (end states back off for free).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from biasing.graph import BoostingGraph, GraphMode, GraphParams
from biasing.terms import Term, TermError, TermValidationError
from biasing.tokenizer import WORD_BOUNDARY, GraphTokenizer, SpanIndex, as_tokenizer, fold

UNREPRESENTABLE = "cannot be represented by the model's tokenizer (it has characters the model cannot emit)"


WEIGHT_EXPONENT = 0.5  # issue 35: weight 2 (the highest level) boosts 1.41x, not 2x, which hijacked captions


def boost_multiplier(weight: float) -> float:
    """How much a term's weight (a boost level, 0.5-2; 1 is the default) multiplies its scores:
    ``weight ** WEIGHT_EXPONENT``, so the highest level favours a term without outweighing the audio."""
    return float(float(weight) ** WEIGHT_EXPONENT)


def token_scores(num_tokens: int, weight: float, params: GraphParams) -> list[float]:
    """NeMo's ``ContextGraph`` score of each of a phrase's ``num_tokens`` greedy tokens, times the term's
    ``boost_multiplier``: ``cs`` for the first token, ``cs * depth_scaling + ln(k + 1)`` for token k >= 1."""
    context, scaling = params.context_score, params.depth_scaling
    multiplier = boost_multiplier(weight)
    return [
        multiplier * (context if k == 0 else context * scaling + math.log(k + 1)) for k in range(num_tokens)
    ]


def scored_token_lengths(pieces: Sequence[str], index: SpanIndex | None = None) -> list[int]:
    """Character lengths of the tokens a phrase's score is given to: its greedy (folded) pieces, with a bare
    word-boundary piece joined to the piece after it when some label spells the boundary and that piece's
    first character in one (any casing; ``index`` None: always). SentencePiece spells "uvelol" as
    ``▁ u vel ol`` (there is no ``▁u``) while the model says ``▁U vel ol``: scored as a token of its own,
    the bare ``▁`` would give the model's one first piece two tokens' scores (3.69 instead of NeMo's
    first-token 1.0; issue 25). Where no label can (``▁ z`` with neither ``▁z`` nor ``▁Z``), the model emits
    the bare ``▁`` too, and it keeps its token score as in NeMo's tree."""
    lengths: list[int] = []
    carry = 0
    for position, piece in enumerate(pieces):
        following = pieces[position + 1] if position + 1 < len(pieces) else ""
        joinable = bool(following) and (index is None or bool(index.table.get(WORD_BOUNDARY + following[0])))
        if piece == WORD_BOUNDARY and joinable:
            carry += 1
            continue
        lengths.append(carry + len(piece))
        carry = 0
    return lengths


def continues_word(surface: str) -> bool:
    """True when a label with this surface goes on spelling the word before it: it does not start a word
    (no ``▁``) and starts with a letter or digit. Punctuation and apostrophes ("'s") end a word."""
    return bool(surface) and not surface.startswith(WORD_BOUNDARY) and surface[0].isalnum()


def label_continuations(surfaces: Sequence[str]) -> np.ndarray:
    """``continues_word`` of every label."""
    return np.fromiter((continues_word(s) for s in surfaces), dtype=bool, count=len(surfaces))


def within_token_shares(num_chars: int, tau: float) -> np.ndarray:
    """Cumulative share of a token's score after each of its characters: cumsum of
    ``exp((i+1)^tau) / sum_j exp((j+1)^tau)``; exactly 1.0 at the token's last character."""
    exponents = np.arange(1, num_chars + 1, dtype=np.float64) ** tau
    shares = np.exp(exponents - exponents.max())
    cumulative = np.cumsum(shares) / shares.sum()
    cumulative[-1] = 1.0
    return np.asarray(cumulative, dtype=np.float64)


def chain_potentials(scores: Sequence[float], lengths: Sequence[int], tau: float) -> np.ndarray:
    """Potential after each character of a chain whose greedy token k has ``lengths[k]`` characters and
    score ``scores[k]``: the scores of the tokens before it plus ``Delta_{k,i}`` (TurboBias 2.0), the share of
    token k's own score up to its character i. At every greedy token end it equals NeMo's tree node score."""
    token_array = np.asarray(scores, dtype=np.float64)
    return chain_potentials_batch(token_array, np.asarray(lengths, dtype=np.int64), [len(scores)], tau)


def chain_potentials_batch(
    scores: np.ndarray, lengths: np.ndarray, tokens_per_chain: Sequence[int], tau: float
) -> np.ndarray:
    """``chain_potentials`` of many chains at once: token arrays concatenated chain after chain, and the
    characters' potentials returned the same way."""
    if scores.size == 0:
        return np.zeros(0, dtype=np.float64)
    running = np.cumsum(scores)
    first_token = np.cumsum([0, *tokens_per_chain[:-1]])
    offsets = np.repeat(running[first_token] - scores[first_token], tokens_per_chain)
    before = running - scores - offsets
    cached = {n: within_token_shares(n, tau) for n in set(lengths.tolist())}
    within = np.concatenate([cached[n] for n in lengths.tolist()])
    return np.asarray(np.repeat(before, lengths) + np.repeat(scores, lengths) * within, dtype=np.float64)


@dataclass
class _Trie:
    """A trie whose node ids are assigned in insertion order (a parent's id is below its children's).

    Scores are not stored here: callers record (path, scores) and reduce them with a max afterwards.
    """

    children: list[dict[Hashable, int]] = field(default_factory=lambda: [{}])
    parent: list[int] = field(default_factory=lambda: [0])
    symbol: list[Hashable] = field(default_factory=lambda: [None])
    depth: list[int] = field(default_factory=lambda: [0])
    is_end: list[bool] = field(default_factory=lambda: [False])

    def insert(self, symbols: Sequence[Hashable]) -> tuple[list[int], int]:
        """Insert a path; returns its node ids (root first) and how many symbols already existed."""
        children, node, path = self.children, 0, [0]
        shared = 0
        for sym in symbols:
            nxt = children[node].get(sym)
            if nxt is None:
                break
            node = nxt
            path.append(node)
            shared += 1
        for depth in range(shared + 1, len(symbols) + 1):
            nxt = len(self.parent)
            children[node][symbols[depth - 1]] = nxt
            children.append({})
            self.parent.append(node)
            self.symbol.append(symbols[depth - 1])
            self.depth.append(depth)
            self.is_end.append(False)
            node = nxt
            path.append(node)
        self.is_end[node] = True
        return path, shared

    def lookup(self, symbols: Sequence[Hashable]) -> int | None:
        node = 0
        for sym in symbols:
            child = self.children[node].get(sym)
            if child is None:
                return None
            node = child
        return node

    def suffix_links(self, order: np.ndarray) -> np.ndarray:
        """Aho-Corasick failure links (longest proper suffix that is a node), computed in depth order."""
        fail = np.zeros(len(self.parent), dtype=np.int64)
        children, parent, symbol = self.children, self.parent, self.symbol
        for node in order.tolist():
            up = parent[node]
            if up == 0:
                continue
            sym, candidate = symbol[node], int(fail[up])
            while True:
                found = children[candidate].get(sym)
                if found is not None:
                    fail[node] = found
                    break
                if candidate == 0:
                    break
                candidate = int(fail[candidate])
        return fail


def _depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    return [order[bounds[d] : bounds[d + 1]] for d in range(1, len(bounds) - 1)]


def _assemble(
    trie: _Trie,
    arcs: tuple[list[int], list[int], list[int]],
    root_targets: np.ndarray,
    potential: np.ndarray,
    backoff: tuple[np.ndarray, np.ndarray, np.ndarray],
    continuations: np.ndarray,
    params: GraphParams,
) -> BoostingGraph:
    """The arrays of a graph; ``backoff`` is (fail links, back-off weights, word-end refunds)."""
    fail, backoff_weight, refund = backoff
    vocab_size = root_targets.shape[0]
    depth = np.asarray(trie.depth, dtype=np.int64)
    is_end = np.asarray(trie.is_end, dtype=bool)
    arc_from = np.concatenate([np.zeros(vocab_size, dtype=np.int64), np.asarray(arcs[0], dtype=np.int64)])
    arc_to = np.concatenate([root_targets, np.asarray(arcs[1], dtype=np.int64)])
    arc_label = np.concatenate([np.arange(vocab_size, dtype=np.int64), np.asarray(arcs[2], dtype=np.int64)])
    order = np.lexsort((arc_label, arc_from))
    arc_from, arc_to, arc_label = arc_from[order], arc_to[order], arc_label[order]
    num_states = len(trie.parent)
    states = np.arange(num_states)
    starts = np.searchsorted(arc_from, states, side="left")
    ends = np.searchsorted(arc_from, states, side="right")
    idx = np.int32 if max(num_states, arc_from.size + vocab_size) < np.iinfo(np.int32).max else np.int64
    return BoostingGraph(
        vocab_size=vocab_size,
        max_order=int(depth.max()) + 1,
        mode=params.mode,
        arc_from=arc_from.astype(idx),
        arc_to=arc_to.astype(idx),
        arc_label=arc_label.astype(idx),
        arc_weight=(potential[arc_to] - potential[arc_from]).astype(np.float32),
        state_arcs_start=starts.astype(idx),
        state_arcs_end=ends.astype(idx),
        state_order=(depth + 1).astype(idx),
        backoff_to=fail.astype(idx),
        backoff_weight=backoff_weight.astype(np.float32),
        final_weight=np.where(is_end, params.final_eos_score, 0.0).astype(np.float32),
        potential=potential.astype(np.float32),
        is_end=is_end,
        word_end_refund=np.maximum(refund, 0.0).astype(np.float32),
        label_continues_word=continuations,
    )


def _chain_arcs(
    chain: str,
    path: list[int],
    shared: int,
    reach: list[bool],
    index: SpanIndex,
    arcs: tuple[list[int], list[int], list[int]],
) -> bool:
    """Add an arc (not from the root) for every label spelling a span of ``chain``; True if some label path
    spells the whole chain. Spans within the first ``shared`` characters were added by the chains that created
    those states, so only spans ending on a new state are visited (no duplicates, no set of seen arcs).
    ``reach[node]`` (whether a node's prefix is spellable) is extended for the new states."""
    froms, tos, labels = arcs
    table, max_len = index.table, index.max_len
    size = len(chain)
    reachable = [reach[node] for node in path[: shared + 1]] + [False] * (size - shared)
    for start in range(max(0, shared + 1 - max_len), size):
        origin = path[start]
        for end in range(max(start + 1, shared + 1), min(size, start + max_len) + 1):
            found = table.get(chain[start:end])
            if found is None:
                break
            if not found:
                continue
            if reachable[start]:
                reachable[end] = True
            if origin:
                count = len(found)
                froms.extend((origin,) * count)
                tos.extend((path[end],) * count)
                labels.extend(found)
    reach.extend(reachable[shared + 1 :])
    return reachable[size]


def _root_targets_chars(trie: _Trie, adapter: GraphTokenizer, single_chars_only: bool) -> np.ndarray:
    """For each label: the longest suffix of its folded surface that is a state (the root if none)."""
    targets = np.zeros(adapter.vocab_size, dtype=np.int64)
    root_children = trie.children[0]
    for label, surface in enumerate(adapter.surfaces):
        if not surface or (single_chars_only and len(surface) != 1):
            continue
        folded = fold(surface)
        for start in range(len(folded)):
            if folded[start] in root_children:
                node = trie.lookup(folded[start:])
                if node is not None:
                    targets[label] = node
                    break
    return targets


def _bank_inner_matches(
    levels: list[np.ndarray],
    trie_arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    fail: np.ndarray,
    potential: np.ndarray,
    banked: tuple[np.ndarray, np.ndarray],
) -> None:
    """Raise ``banked``'s (banked, closed)[s] to the best phrase completed strictly inside ``s`` (not only as
    its prefix), followed in s's chain by a word boundary, and not lying wholly in the suffix ``fail[s]``,
    which keeps scoring it after the back-off (e.g. "york" inside a failed "new york times"). Only states
    below such an inner match need the walk. ``trie_arrays``: (parent, depth, is_end, boundary symbol)."""
    parent, depth, is_end, boundary = trie_arrays
    banked_all, closed = banked
    out_link = np.zeros_like(fail)  # nearest complete phrase among the proper suffixes (0: none)
    below_match = np.zeros(fail.shape, dtype=bool)
    for level in levels:
        suffix = fail[level]
        out_link[level] = np.where(is_end[suffix], suffix, out_link[suffix])
        below_match[level] = below_match[parent[level]] | (out_link[level] != 0)
    for state in np.flatnonzero(below_match).tolist():
        limit = depth[state] - depth[fail[state]]
        best, node, after = closed[state], parent[state], state  # ``after``: the node following ``node``
        while node != 0:  # phrases ending at ``state`` itself lie in fail[state]: never banked here
            match = out_link[node] if boundary[after] else 0
            while match != 0:
                if depth[node] - depth[match] < limit:
                    best = max(best, potential[match])
                match = out_link[match]
            after, node = node, parent[node]
        closed[state] = best
        banked_all[state] = max(banked_all[state], best)


def _max_per_node(num_states: int, nodes: list[int], values: np.ndarray) -> np.ndarray:
    best = np.zeros(num_states, dtype=np.float64)
    np.maximum.at(best, np.asarray(nodes, dtype=np.int64), values)
    return best


def _compile_variative(terms: Sequence[Term], adapter: GraphTokenizer, params: GraphParams) -> BoostingGraph:
    single_chars_only = params.mode is GraphMode.CHAR
    index = adapter.span_index(single_chars_only)
    trie, reach = _Trie(), [True]
    arcs: tuple[list[int], list[int], list[int]] = ([], [], [])
    spellings = [
        (position, text, term.weight)
        for position, term in enumerate(terms)
        for text in (term.text, *term.alternates)
    ]
    segmented = adapter.pieces_batch([fold(text) for _, text, _ in spellings])
    nodes: list[int] = []
    scores: list[float] = []
    lengths: list[int] = []
    tokens_per_chain: list[int] = []
    errors = []
    for (position, text, weight), pieces in zip(spellings, segmented, strict=True):
        chain = fold("".join(pieces))
        if not chain:
            errors.append(TermError(position, text, "is empty after tokenization"))
            continue
        path, shared = trie.insert(chain)
        if not _chain_arcs(chain, path, shared, reach, index, arcs):
            errors.append(TermError(position, text, UNREPRESENTABLE))
        nodes.extend(path[1:])
        token_lengths = scored_token_lengths([fold(piece) for piece in pieces], index)
        scores.extend(token_scores(len(token_lengths), weight, params))
        lengths.extend(token_lengths)
        tokens_per_chain.append(len(token_lengths))
    if errors:
        raise TermValidationError(errors)
    token_array, length_array = np.asarray(scores, dtype=np.float64), np.asarray(lengths, dtype=np.int64)
    values = chain_potentials_batch(token_array, length_array, tokens_per_chain, params.tau)
    potential = _max_per_node(len(trie.parent), nodes, values)
    depth = np.asarray(trie.depth, dtype=np.int64)
    parent = np.asarray(trie.parent, dtype=np.int64)
    is_end = np.asarray(trie.is_end, dtype=bool)
    boundary = np.asarray([not (isinstance(c, str) and c.isalnum()) for c in trie.symbol], dtype=bool)
    banked = np.zeros_like(potential)  # what leaving a state keeps when the next label starts a word
    closed = np.zeros_like(potential)  # ... and when it goes on spelling the word (the phrase ends earlier)
    levels = _depth_levels(depth) if len(depth) > 1 else []
    for level in levels:  # shared prefixes take the max over their phrases; never decreasing along a path
        up = parent[level]
        potential[level] = np.maximum(potential[level], potential[up])
        closed[level] = np.where(boundary[level], banked[up], closed[up])
        banked[level] = np.where(is_end[level], potential[level], closed[level])
    fail = trie.suffix_links(np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64))
    _bank_inner_matches(levels, (parent, depth, is_end, boundary), fail, potential, (banked, closed))
    backoff_weight = potential[fail] - potential + banked
    backoff_weight[0] = 0.0
    refund = banked - closed
    refund[0] = 0.0
    root_targets = _root_targets_chars(trie, adapter, single_chars_only)
    continuations = label_continuations(adapter.surfaces)
    return _assemble(
        trie, arcs, root_targets, potential, (fail, backoff_weight, refund), continuations, params
    )


def _compile_tree(terms: Sequence[Term], adapter: GraphTokenizer, params: GraphParams) -> BoostingGraph:
    trie = _Trie()
    spellings = [
        (position, text, term.weight)
        for position, term in enumerate(terms)
        for text in (term.text, *term.alternates)
    ]
    nodes: list[int] = []
    values: list[float] = []
    errors = []
    for (position, text, weight), ids in zip(
        spellings, adapter.ids_batch([s[1] for s in spellings]), strict=True
    ):
        if not ids or not all(adapter.surfaces[i] for i in ids):
            errors.append(TermError(position, text, UNREPRESENTABLE))
            continue
        path, _ = trie.insert(ids)
        context = params.context_score * boost_multiplier(weight)
        nodes.extend(path[1:])
        values.append(context)
        values.extend(context * params.depth_scaling + math.log(i + 1) for i in range(1, len(ids)))
    if errors:
        raise TermValidationError(errors)
    token_score = _max_per_node(len(trie.parent), nodes, np.asarray(values, dtype=np.float64))
    depth = np.asarray(trie.depth, dtype=np.int64)
    parent = np.asarray(trie.parent, dtype=np.int64)
    is_end = np.asarray(trie.is_end, dtype=bool)
    potential = np.zeros_like(token_score)
    levels = _depth_levels(depth) if len(depth) > 1 else []
    for level in levels:
        potential[level] = potential[parent[level]] + token_score[level]
    fail = trie.suffix_links(np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64))
    backoff_weight = np.where(is_end, 0.0, potential[fail] - potential)
    backoff_weight[0] = 0.0
    refund = np.where(is_end, potential - potential[fail], 0.0)  # a word going on: a failed partial match
    refund[0] = 0.0
    children = [(up, node, trie.symbol[node]) for node, up in enumerate(trie.parent) if node != 0 and up != 0]
    token_ids = [cast(int, c[2]) for c in children]  # a token trie's symbols are label ids
    arcs = ([c[0] for c in children], [c[1] for c in children], token_ids)
    root_targets = np.zeros(adapter.vocab_size, dtype=np.int64)
    for label, node in trie.children[0].items():
        root_targets[cast(int, label)] = node
    continuations = label_continuations(adapter.surfaces)
    return _assemble(
        trie, arcs, root_targets, potential, (fail, backoff_weight, refund), continuations, params
    )


def compile_graph(terms: Sequence[Any], tokenizer: Any, params: GraphParams = GraphParams()) -> BoostingGraph:
    """Build the arrays for ``terms`` (``Term`` or str, already normalised) without validating them."""
    adapter = as_tokenizer(tokenizer)
    items = [Term(t) if isinstance(t, str) else t for t in terms]
    if params.mode is GraphMode.CASE_SENSITIVE_TREE:
        return _compile_tree(items, adapter, params)
    return _compile_variative(items, adapter, params)


def build_graph(terms: Sequence[Any], tokenizer: Any, params: GraphParams = GraphParams()) -> BoostingGraph:
    """Compile normalised terms (``Term`` or str) for ``tokenizer`` into an immutable, validated graph.

    Raises ``TermValidationError`` for terms the tokenizer cannot spell (never skips them).
    """
    graph = compile_graph(terms, tokenizer, params)
    graph.validate()
    return graph
