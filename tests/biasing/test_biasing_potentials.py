"""Issue 25: the case-insensitive graph's potentials spread each greedy token's score over that token's own
characters (TurboBias 2.0's ``Delta_{k,i}``), so on the tokens the tree knows it scores like NeMo's tree.

The first graph spread the whole phrase's score over the whole chain: a long term's first tokens got a few
per cent of it (``Nuviridex Group`` earned 1.66 after ``▁N u v`` where the tree gives 6.79), and beam search
rarely entered the term. A bare ``▁`` greedy piece is joined to the piece after it: scored apart, the model's
single piece ``▁U`` (SentencePiece spells "uvelol" ``▁ u vel ol``) earned two tokens' scores at the root.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biasing.compile import build_graph, chain_potentials, scored_token_lengths, token_scores
from biasing.graph import GraphMode, GraphParams
from biasing.tokenizer import SpanIndex
from tests.biasing.biasing_helpers import (
    BOUNDARY,
    WORDS,
    lower1,
    nemo_token_scores,
    nemo_totals,
    scored_pieces,
    surfaces,
)

TREE = GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
words = st.one_of(st.sampled_from(WORDS), st.text(alphabet=LETTERS, min_size=2, max_size=7))
phrases = st.lists(words, min_size=1, max_size=3).map(" ".join)


def token_end_totals(bpe, phrase: str) -> dict[int, float]:
    """{greedy label index: NeMo's score of the scored tokens so far} at each scored token's end."""
    pieces = bpe.encode(phrase, out_type=str)
    scored = scored_pieces(pieces, set(surfaces(bpe)))
    scores = np.cumsum(nemo_token_scores(len(scored)))
    ends_of_tokens = np.cumsum([len(p) for p in scored]).tolist()
    ends_of_pieces = np.cumsum([len(p) for p in pieces]).tolist()
    return {
        i: float(scores[ends_of_tokens.index(end)])
        for i, end in enumerate(ends_of_pieces)
        if end in ends_of_tokens
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(phrase=phrases, tau=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_greedy_lowercase_tokens_score_like_nemo_tree_after_every_token(bpe, phrase, tau) -> None:
    ids = bpe.encode(phrase)
    graph = nemo_totals(build_graph([phrase], bpe, GraphParams(tau=tau)), [ids])[0]
    for index, expected in token_end_totals(bpe, phrase).items():
        assert graph[index] == pytest.approx(expected, abs=1e-4)
    labels = set(surfaces(bpe))
    if len(scored_pieces(bpe.encode(phrase, out_type=str), labels)) == len(ids):  # the tree's own tokens
        tree = nemo_totals(build_graph([phrase], bpe, TREE), [ids])[0]
        np.testing.assert_allclose(graph, tree, rtol=1e-5, atol=1e-4)


def test_first_token_gets_the_trees_first_token_score(bpe) -> None:
    # "nuviridex" is six greedy tokens; the first one must earn cs (1.0), not a share of the whole phrase
    ids = bpe.encode("Nuviridex")
    assert len(ids) > 2
    totals = nemo_totals(build_graph(["nuviridex"], bpe, GraphParams(tau=0.5)), [ids])
    assert totals[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert totals[0, 1] == pytest.approx(sum(nemo_token_scores(2)), abs=1e-4)


@pytest.mark.parametrize("tau", [0.0, 0.5, 4.0])
def test_a_bare_boundary_piece_is_scored_with_the_next_piece(bpe, tau: float) -> None:
    # greedy "▁ ca e l m ir a", the model's "▁C a e l m ir a": its one-piece start earns the first token's
    # score at most, and the whole word NeMo's score of the six scored tokens
    assert bpe.encode("caelmira", out_type=str)[0] == BOUNDARY
    labels = bpe.encode("Caelmira")
    totals = nemo_totals(build_graph(["caelmira"], bpe, GraphParams(tau=tau)), [labels])[0]
    assert 0 < totals[0] <= 1.0 + 1e-6
    assert totals[-1] == pytest.approx(sum(nemo_token_scores(6)), abs=1e-4)


def test_a_bare_boundary_no_piece_can_join_keeps_its_token_score(bpe) -> None:
    # greedy "▁ v e l ca d e" and the model's "▁ V e l ...": no "▁v"/"▁V" piece, so the model emits the bare
    # "▁" as well and it is scored as NeMo's tree scores it
    assert bpe.encode("Velcade", out_type=str)[0] == BOUNDARY
    ids = bpe.encode("velcade")
    graph = nemo_totals(build_graph(["velcade"], bpe, GraphParams(tau=2.0)), [ids])
    np.testing.assert_allclose(graph, nemo_totals(build_graph(["velcade"], bpe, TREE), [ids]), atol=1e-4)


def test_another_casing_earns_the_tree_score_at_each_greedy_token_end(bpe) -> None:
    # The title-cased emission segments differently; wherever it ends on a scored token's end it holds
    # exactly NeMo's score of the tokens up to there.
    pieces = scored_pieces([lower1(p) for p in bpe.encode("caelmira", out_type=str)], set(surfaces(bpe)))
    ends_of_tokens = np.cumsum([len(p) for p in pieces]).tolist()
    boundaries = dict(zip(ends_of_tokens, np.cumsum(nemo_token_scores(len(pieces))), strict=True))
    graph = build_graph(["caelmira"], bpe, GraphParams(tau=0.5))
    labels = bpe.encode("Caelmira")
    assert labels != bpe.encode("caelmira")
    totals = nemo_totals(graph, [labels])[0]
    ends = np.cumsum([len(bpe.id_to_piece(label)) for label in labels]).tolist()
    checked = [(end, total) for end, total in zip(ends, totals, strict=True) if end in boundaries]
    assert len(checked) > 2, "too few shared token boundaries"
    for end, total in checked:
        assert total == pytest.approx(boundaries[end], abs=1e-4)


def test_scored_token_lengths_join_bare_boundaries() -> None:
    assert scored_token_lengths(["▁", "u", "vel", "ol"]) == [2, 3, 2]
    assert scored_token_lengths(["▁k", "ar", "▁", "z", "en"]) == [2, 2, 2, 2]
    assert scored_token_lengths(["▁lin", "▁"]) == [4, 1]
    index = SpanIndex({"▁": (0,), "▁u": (1,), "u": (2,), "z": (3,)}, 2)
    assert scored_token_lengths(["▁", "u", "▁", "z"], index) == [2, 1, 1]


@pytest.mark.parametrize("tau", [0.0, 0.5, 2.0, 8.0])
def test_chain_potentials_spread_each_token_over_its_own_characters(tau: float) -> None:
    scores = token_scores(3, 1.0, GraphParams())
    potentials = chain_potentials(scores, [2, 3, 1], tau)
    assert potentials[[1, 4, 5]] == pytest.approx(np.cumsum(scores))  # token ends: the tree's node scores
    if tau < 8.0:
        assert 0 < potentials[0] < scores[0]
        assert scores[0] < potentials[2] < potentials[3] < scores[0] + scores[1]
    if tau == 0.0:
        assert potentials[0] == pytest.approx(scores[0] / 2)
        assert potentials[2] == pytest.approx(scores[0] + scores[1] / 3)
    if tau == 8.0:  # all at the token's end: NeMo's "score at BPE end"
        assert potentials[[0, 2, 3]] == pytest.approx([0.0, scores[0], scores[0]], abs=1e-6)
