"""Truth tables computed by hand (character model, tau = 0, cs = ds = 1) and graph invariants.

A character model spells every word as a bare "▁" and one piece per letter, and no piece joins "▁" to a
letter, so the "▁" is a token of its own: a word of n letters is n + 1 tokens (NeMo's scores: k tokens earn
``w(k)``), and a prefix holds the scores of the tokens it completes, whatever the phrase's length.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from biasing.compile import build_graph
from biasing.graph import BoostingGraph, GraphMode, GraphParams, GraphValidationError
from biasing.terms import Term, TermValidationError
from tests.biasing.biasing_helpers import nemo_totals, runtime_totals

HAND = GraphParams(mode=GraphMode.CHAR, tau=0.0, context_score=1.0, depth_scaling=1.0)


def w(tokens: int) -> float:
    """NeMo's score of k tokens with cs = ds = 1: k + ln(k!)."""
    return tokens + math.log(math.factorial(tokens))


def total(sp, phrases: list[str], text: str, params: GraphParams = HAND) -> float:
    graph = build_graph(phrases, sp, params)
    labels = [sp.piece_to_id(char) for char in text]
    assert sp.unk_id() not in labels
    return float(runtime_totals(graph, [labels])[0, -1])


@pytest.mark.parametrize(
    ("phrases", "text", "expected"),
    [
        (["abc"], "▁abc", w(4)),  # complete match
        (["abc"], "▁ABC", w(4)),  # any casing
        (["abc"], "▁aBc", w(4)),
        (["abc"], "▁ab", w(3)),  # pending partial match holds its tokens' scores
        (["abc"], "▁", w(1)),
        (["abc"], "▁abx", 0.0),  # failed partial match: refunded exactly
        (["abc"], "▁ab▁x", 0.0),
        (["abc"], "▁ab▁abc", w(4)),  # failed, then complete
        (["abc"], "▁abc▁x", w(4)),  # completed phrase keeps its score when a new word follows
        (["abc"], "▁abcx", 0.0),  # ... and not when the word goes on ("halvorsened"): refunded in full
        (["abc"], "▁abcx▁abc", w(4)),  # the refund does not stop the next match
        (["ab cd"], "▁ab▁cdx", 0.0),  # a multi-word phrase too
        (["ab", "ab cd"], "▁ab▁cdx", w(3)),  # the inner phrase a space followed stays
        (["ab cd", "cd ef"], "▁ab▁cd▁ef", 2 * w(6)),  # overlapping phrases both score in full
        (["ab cd", "cd ef"], "▁ab▁cd▁ex", w(6)),  # the second one's failed partial is refunded
        (["ab cx", "cd"], "▁ab▁cd", w(3)),  # phrase starting inside another's failed partial match
        (["ab cd ef", "cd"], "▁ab▁cd▁x", w(3)),  # phrase inside another's failed partial match
        (["ab cd ef", "cd"], "▁ab▁cd▁ef", w(9)),  # inside a completed longer phrase: the longer one counts
        # a completed prefix counts only where its word ends (shared prefixes take the larger potential)
        (["ab", "abcd"], "▁abcx", 0.0),
        (["abcd", "ab"], "▁abx", 0.0),
        (["ab", "abcd"], "▁abcd", w(5)),
        (["ab", "ab cd"], "▁ab▁cx", w(3)),
    ],
)
def test_truth_table(char_sp, phrases: list[str], text: str, expected: float) -> None:
    assert total(char_sp, phrases, text) == pytest.approx(expected, abs=1e-4)


def test_tau_moves_score_to_the_end_of_each_token(bpe) -> None:
    # "nuviridex": greedy ▁n u v ir id ex; "ir" spoken as "i" then "r": after "i", tau decides the share
    labels = [bpe.piece_to_id(p) for p in ("▁N", "u", "v", "i")]
    assert bpe.unk_id() not in labels
    before_ir = nemo_score_of(3)

    def after_i(tau: float) -> float:
        graph = build_graph(["nuviridex"], bpe, GraphParams(tau=tau))
        return float(nemo_totals(graph, [labels])[0, -1])

    token_ir = nemo_score_of(4) - before_ir
    assert after_i(0.0) == pytest.approx(before_ir + token_ir / 2, abs=1e-4)
    assert before_ir < after_i(2.0) < after_i(0.0)
    assert after_i(8.0) == pytest.approx(before_ir, abs=1e-4)


def nemo_score_of(tokens: int) -> float:
    """NeMo's default ContextGraph score (cs 1, depth scaling 2) of a phrase's first ``tokens`` tokens."""
    return 1.0 + sum(2.0 + math.log(i + 1) for i in range(1, tokens))


@pytest.mark.parametrize(
    ("weight", "multiplier"), [(0.5, 0.5**0.5), (1.0, 1.0), (1.5, 1.5**0.5), (2.0, 2**0.5)]
)
def test_a_weight_is_a_boost_level_its_square_root_multiplies_the_score(
    char_sp, weight: float, multiplier: float
) -> None:
    graph = build_graph([Term("abc", weight=weight)], char_sp, HAND)
    labels = [char_sp.piece_to_id(c) for c in "▁abc"]
    assert nemo_totals(graph, [labels])[0, -1] == pytest.approx(multiplier * w(4), abs=1e-4)


def test_alternate_spellings_score_like_the_term(char_sp) -> None:
    graph = build_graph([Term("abc", alternates=("xyz",))], char_sp, HAND)
    labels = [char_sp.piece_to_id(c) for c in "▁XyZ"]
    assert nemo_totals(graph, [labels])[0, -1] == pytest.approx(w(4), abs=1e-4)


def test_char_mode_has_two_parallel_arcs_per_letter(char_sp) -> None:
    graph = build_graph(["ab"], char_sp, HAND)
    root = graph.arcs_of(0)
    state_a = root[char_sp.piece_to_id("▁")][0]
    arcs = graph.arcs_of(state_a)
    assert set(arcs) == {char_sp.piece_to_id("a"), char_sp.piece_to_id("A")}
    assert arcs[char_sp.piece_to_id("a")] == arcs[char_sp.piece_to_id("A")]


def test_unrepresentable_term_is_an_error_not_skipped(bpe) -> None:
    with pytest.raises(TermValidationError) as caught:
        build_graph(["linezolid", "Ωmega", "acme", "日本"], bpe)
    assert [(e.index, e.text) for e in caught.value.errors] == [(1, "Ωmega"), (3, "日本")]
    assert "cannot be represented by the model's tokenizer" in str(caught.value)


def test_empty_list_is_a_valid_graph(bpe) -> None:
    graph = build_graph([], bpe)
    assert graph.num_states == 1 and graph.num_arcs == bpe.get_piece_size()
    assert not graph.arc_weight.any()


def test_graph_is_immutable(bpe) -> None:
    graph = build_graph(["acme"], bpe)
    with pytest.raises(ValueError):
        graph.arc_weight[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.vocab_size = 3  # type: ignore[misc]


def _drop_arc(graph: BoostingGraph, arc: int) -> BoostingGraph:
    keep = np.ones(graph.num_arcs, dtype=bool)
    keep[arc] = False
    starts, ends = graph.state_arcs_start.copy(), graph.state_arcs_end.copy()
    starts[starts > arc] -= 1
    ends[ends > arc] -= 1
    owner = graph.arc_from[arc]
    ends[owner] = graph.state_arcs_end[owner] - 1
    arrays = {
        name: getattr(graph, name)[keep].copy() for name in ("arc_from", "arc_to", "arc_label", "arc_weight")
    }
    return dataclasses.replace(graph, state_arcs_start=starts, state_arcs_end=ends, **arrays)


def test_validation_rejects_missing_root_label(bpe) -> None:
    graph = build_graph(["acme group"], bpe)
    with pytest.raises(GraphValidationError, match="root"):
        _drop_arc(graph, 5).validate()


def test_validation_rejects_backoff_cycle(bpe) -> None:
    graph = build_graph(["acme group"], bpe)
    backoff = graph.backoff_to.copy()
    backoff[3], backoff[4] = 4, 3
    with pytest.raises(GraphValidationError, match="never reaches the root"):
        dataclasses.replace(graph, backoff_to=backoff).validate()


def test_validation_rejects_duplicate_label(bpe) -> None:
    graph = build_graph(["acme group"], bpe)
    state = next(s for s in range(1, graph.num_states) if len(graph.arcs_of(s)) >= 2)
    labels = graph.arc_label.copy()
    start = graph.state_arcs_start[state]
    labels[start + 1] = labels[start]
    with pytest.raises(GraphValidationError, match="duplicate label"):
        dataclasses.replace(graph, arc_label=labels).validate()
