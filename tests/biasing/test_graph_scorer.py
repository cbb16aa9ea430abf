"""``biasing.scorer.GraphScorer``: the pure-numpy application of a graph equals NeMo's advance, a plain loop
over the back-off chain, and the scoring contract of biasing/graph.py (brute-force ``ReferenceScorer``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biasing.compile import build_graph
from biasing.graph import BoostingGraph, GraphMode, GraphParams
from biasing.nemo.compat import to_nemo_model
from biasing.scorer import GraphScorer
from biasing.terms import Term
from tests.biasing.biasing_helpers import (
    nemo_score,
    phrase_case,
    runtime_totals,
    weighted_phrases,
)

SETTINGS = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
taus = st.sampled_from([0.0, 0.5, 2.0])
TREE = GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE)


def loop_scores(graph: BoostingGraph, state: int, label: int) -> tuple[float, int]:
    """The advance written out for one label: look it up on each state of the back-off chain; a label that
    continues the word pays the word-end refund of each state it backs off from."""
    accumulated = 0.0
    continues = bool(graph.label_continues_word[label])
    while True:
        arcs = graph.arcs_of(state)
        if label in arcs:
            target, weight = arcs[label]
            return accumulated + weight, target
        if state == 0:
            raise AssertionError("the root has an arc for every label")
        accumulated += float(graph.backoff_weight[state])
        if continues:
            accumulated -= float(graph.word_end_refund[state])
        state = int(graph.backoff_to[state])


def running_totals(scorer: GraphScorer, labels: list[int]) -> list[float]:
    """Running totals through the dense rows (what a beam search adds)."""
    state, total, out = scorer.initial_state(), 0.0, []
    for label in labels:
        boost, next_state = scorer.scores(state)
        total += float(boost[label])
        state = int(next_state[label])
        out.append(total)
    return out


def runtime_rows(graph: BoostingGraph) -> tuple[np.ndarray, np.ndarray]:
    """Our ``SparseAdvanceMultiModel.advance`` (the service's first pass) from every state of ``graph``."""
    from biasing.nemo.multi_model import SparseAdvanceMultiModel

    multi = SparseAdvanceMultiModel(vocab_size=graph.vocab_size, use_triton=False)
    model_id = multi.add_model(to_nemo_model(graph), alpha=1.0)
    states = torch.arange(graph.num_states)
    with torch.inference_mode():
        scores, next_states = multi.advance(states, torch.full_like(states, model_id))
    return scores.numpy(), next_states.numpy()


def nemo_rows(graph: BoostingGraph, eos_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """NeMo's own ``GPUBoostingTreeModel.advance`` from every state of ``graph`` (CPU)."""
    model = to_nemo_model(graph)
    with torch.inference_mode():
        scores, next_states = model.advance(torch.arange(graph.num_states), eos_id=eos_id)
    return scores.numpy(), next_states.numpy()


@SETTINGS
@given(items=weighted_phrases, tau=taus, tree=st.booleans())
def test_dense_rows_equal_nemo_advance_and_the_loop_for_every_state(bpe, items, tau, tree) -> None:
    params = TREE if tree else GraphParams(tau=tau)
    graph = build_graph([Term(text, weight) for text, weight in items], bpe, params)
    scorer = GraphScorer(graph, alpha=1.0)
    nemo_scores, nemo_next = nemo_rows(graph)
    ours, ours_next = runtime_rows(graph)
    starts_word = ~graph.label_continues_word  # where NeMo's rule and ours agree
    for state in range(graph.num_states):
        boost, next_state = scorer.scores(state)
        assert boost.dtype == np.float32 and next_state.dtype == np.int64
        assert boost.shape == next_state.shape == (graph.vocab_size,)
        np.testing.assert_allclose(boost, ours[state], rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(boost[starts_word], nemo_scores[state][starts_word], rtol=1e-6, atol=1e-5)
        assert (boost <= nemo_scores[state] + 1e-5).all()  # a word-end refund only ever takes away
        np.testing.assert_array_equal(next_state, nemo_next[state])
        np.testing.assert_array_equal(next_state, ours_next[state])
        looped = [loop_scores(graph, state, label) for label in range(graph.vocab_size)]
        np.testing.assert_allclose(boost, [s for s, _ in looped], rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(next_state, [t for _, t in looped])
        for label in range(0, graph.vocab_size, 7):
            assert scorer.step(state, label) == (float(boost[label]), int(next_state[label]))


@SETTINGS
@given(items=weighted_phrases, tau=taus, seed=st.integers(0, 2**16), nest=st.booleans())
def test_sequences_score_the_contract_and_nemo(bpe, items, tau, seed, nest) -> None:
    graph, folded, reference, sequences = phrase_case(bpe, items, tau, seed, nest, count=5)
    scorer = GraphScorer(graph, alpha=1.0)
    runtime = runtime_totals(graph, sequences)
    for row, labels in enumerate(sequences):
        expected = reference.totals([folded[label] for label in labels])
        dense = running_totals(scorer, labels)
        np.testing.assert_allclose(dense, expected, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(dense, runtime[row, : len(labels)], rtol=1e-5, atol=1e-4)
        assert scorer.score_sequence(labels) == pytest.approx(dense[-1], abs=1e-4)


def test_every_casing_earns_the_full_score_and_a_failed_match_is_refunded(bpe) -> None:
    graph = build_graph(["husqvarna", "linezolid"], bpe)
    scorer = GraphScorer(graph, alpha=1.0)
    full = nemo_score(len(bpe.encode("husqvarna")))
    for text in ("husqvarna", "Husqvarna", "HUSQVARNA", "HusQvarNA", "the Husqvarna meeting"):
        assert scorer.score_sequence(bpe.encode(text)) == pytest.approx(full, abs=1e-4), text
    assert scorer.score_sequence(bpe.encode("the quarterly review")) == 0.0
    partial = bpe.encode("Husqva")
    assert scorer.score_sequence(partial) > 0
    assert scorer.score_sequence([*partial, *bpe.encode(" the")]) == pytest.approx(0.0, abs=1e-5)


def test_overlapping_phrases_both_score_in_full(bpe) -> None:
    graph = build_graph(["new york", "york times"], bpe, GraphParams(tau=0.5))
    scorer = GraphScorer(graph, alpha=1.0)
    alone = [scorer.score_sequence(bpe.encode(text)) for text in ("new york", "york times")]
    both = scorer.score_sequence(bpe.encode("new york times"))
    assert both == pytest.approx(sum(alone), abs=1e-3)
    assert scorer.score_sequence(bpe.encode("new york and")) == pytest.approx(alone[0], abs=1e-3)


def test_alpha_scales_everything_and_final_score_is_nemos_eos_score(bpe) -> None:
    graph = build_graph(["husqvarna", "metformin"], bpe)
    plain, scaled = GraphScorer(graph, alpha=1.0), GraphScorer(graph, alpha=2.5)
    labels = bpe.encode("the Husqvarna metfor")
    assert scaled.score_sequence(labels) == pytest.approx(2.5 * plain.score_sequence(labels), rel=1e-5)
    eos = 0  # any label: NeMo replaces its column
    with_eos = GraphScorer(graph, alpha=2.5, eos_id=eos)
    nemo_scores, nemo_next = nemo_rows(graph, eos_id=eos)
    nemo_plain, _ = nemo_rows(graph)
    for state in range(graph.num_states):
        raw = plain.scores(state)[0]
        expected = max(0.0, float(raw.max())) + float(graph.final_weight[state])
        assert plain.final_score(state) == pytest.approx(expected, abs=1e-5)
        assert scaled.final_score(state) == pytest.approx(2.5 * expected, abs=1e-5)
        boost, next_state = with_eos.scores(state)
        assert boost[eos] == pytest.approx(2.5 * expected, abs=1e-5)
        if np.allclose(raw, nemo_plain[state], atol=1e-5):  # no word-end refund from here: NeMo's eos score
            assert plain.final_score(state) == pytest.approx(float(nemo_scores[state, eos]), abs=1e-5)
        assert next_state[eos] == nemo_next[state, eos] == state
        np.testing.assert_allclose(np.delete(boost, eos), 2.5 * np.delete(raw, eos), atol=1e-4)
    end = plain.state_after(bpe.encode("husqvarna"))
    assert graph.is_end[end] and graph.final_weight[end] > 0
    assert plain.score_sequence(bpe.encode("husqvarna"), final=True) == pytest.approx(
        plain.score_sequence(bpe.encode("husqvarna")) + plain.final_score(end)
    )


def test_rows_are_cached_read_only_and_bounded(bpe) -> None:
    graph = build_graph(["husqvarna", "linezolid", "metformin"], bpe)
    scorer = GraphScorer(graph, alpha=1.0, cache_size=2)
    first = scorer.scores(1)
    assert scorer.scores(1)[0] is first[0]
    with pytest.raises(ValueError):
        first[0][0] = 1.0
    for state in range(graph.num_states):
        scorer.scores(state)
    assert len(scorer._cache) == 2
    np.testing.assert_array_equal(scorer.scores(1)[0], first[0])
    assert scorer.initial_state() == 0
    with pytest.raises(ValueError):
        scorer.scores(graph.num_states)
    with pytest.raises(ValueError):
        scorer.step(0, graph.vocab_size)
    with pytest.raises(ValueError):
        GraphScorer(graph, alpha=1.0, eos_id=graph.vocab_size)


def test_refund_at_the_end_takes_back_an_unfinished_phrase_only(bpe) -> None:
    graph = build_graph(["husqvarna", "metformin"], bpe, GraphParams(tau=0.5))
    refund = GraphScorer(graph, alpha=2.0, end="refund")
    for text in ("the Husqva", "Metfor", "the quarterly review", ""):
        labels = bpe.encode(text)
        assert refund.score_sequence(labels, final=True) == pytest.approx(0.0, abs=1e-4), text
    full = 2.0 * nemo_score(len(bpe.encode("husqvarna")))
    for text in ("Husqvarna is", "husqvarna metfor"):  # a completed phrase keeps its score
        assert refund.score_sequence(bpe.encode(text), final=True) == pytest.approx(full, abs=1e-4), text
    done = bpe.encode("the HUSQVARNA")
    end = refund.state_after(done)
    assert refund.final_score(end) == pytest.approx(2.0 * float(graph.final_weight[end]), abs=1e-5)
    assert refund.score_sequence(done, final=True) == pytest.approx(
        refund.score_sequence(done) + 2.0 * float(graph.final_weight[end]), abs=1e-4
    )
    with pytest.raises(ValueError):
        GraphScorer(graph, alpha=1.0, end="never")  # type: ignore[arg-type]
