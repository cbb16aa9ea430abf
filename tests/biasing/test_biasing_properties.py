"""Properties (hypothesis): casing/segmentation invariance, brute-force reference agreement, validation."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biasing.compile import build_graph
from biasing.graph import GraphParams, GraphValidationError
from tests.biasing.biasing_helpers import (
    lower1,
    nemo_score,
    nemo_totals,
    phrase_case,
    phrases,
    runtime_totals,
    scored_pieces,
    surfaces,
    weighted_phrases,
)

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

taus = st.sampled_from([0.0, 0.5, 1.0, 2.0])


def chain_of(sp, text: str) -> tuple[str, int]:
    pieces = sp.encode(lower1(text), out_type=str)
    return lower1("".join(pieces)), len(scored_pieces(pieces, set(surfaces(sp))))


def path_totals(graph, chain: str, folded: list[str]) -> tuple[float, float]:
    """(min, max) total over EVERY label path spelling ``chain``, walking the graph's own arcs."""
    state_at, low, high = {0: 0}, {0: 0.0}, {0: 0.0}
    for start in range(len(chain)):
        assert start in state_at, f"position {start} of {chain!r} unreachable"
        arcs = graph.arcs_of(state_at[start])
        for label, surface in enumerate(folded):
            if not surface or not chain.startswith(surface, start):
                continue
            end = start + len(surface)
            target, weight = arcs[label]
            assert state_at.setdefault(end, target) == target, "paths must converge on one state"
            low[end] = min(low.get(end, math.inf), low[start] + weight)
            high[end] = max(high.get(end, -math.inf), high[start] + weight)
    return low[len(chain)], high[len(chain)]


def casings(text: str, rng: random.Random) -> list[str]:
    mixed = "".join(c.upper() if rng.random() < 0.5 else c for c in text)
    return [text.lower(), text.upper(), text.title(), text.capitalize(), mixed]


@SETTINGS
@given(phrase=phrases, others=st.lists(phrases, max_size=3), tau=taus, seed=st.integers(0, 2**16))
def test_every_casing_and_segmentation_earns_the_same_total(bpe, phrase, others, tau, seed) -> None:
    graph = build_graph([phrase, *others], bpe, GraphParams(tau=tau))
    chain, tokens = chain_of(bpe, phrase)
    low, high = path_totals(graph, chain, surfaces(bpe))
    assert low == pytest.approx(high, abs=1e-4)
    if not others:
        assert high == pytest.approx(nemo_score(tokens), rel=1e-5)
    variants = [bpe.encode(text) for text in casings(phrase, random.Random(seed))]
    totals = nemo_totals(graph, variants)
    for row, labels in enumerate(variants):
        assert totals[row, len(labels) - 1] == pytest.approx(high, abs=1e-3)


@SETTINGS
@given(items=weighted_phrases, tau=taus, seed=st.integers(0, 2**16), nest=st.booleans())
def test_runtime_advance_agrees_with_brute_force_reference(bpe, items, tau, seed, nest) -> None:
    graph, folded, reference, sequences = phrase_case(bpe, items, tau, seed, nest, count=6)
    totals = runtime_totals(graph, sequences)
    for row, labels in enumerate(sequences):
        expected = reference.totals([folded[label] for label in labels])
        np.testing.assert_allclose(totals[row, : len(labels)], expected, rtol=1e-4, atol=1e-3)


@SETTINGS
@given(items=st.lists(phrases, min_size=1, max_size=4), pick=st.integers(0, 10**6), kind=st.integers(0, 2))
def test_validation_rejects_corrupt_graphs(bpe, items, pick, kind) -> None:
    graph = build_graph(items, bpe)
    graph.validate()
    if kind == 0:  # a label twice on one state
        candidates = [
            s for s in range(graph.num_states) if graph.state_arcs_end[s] - graph.state_arcs_start[s] >= 2
        ]
        state = candidates[pick % len(candidates)]
        labels = graph.arc_label.copy()
        start = graph.state_arcs_start[state]
        offset = 1 + pick % (graph.state_arcs_end[state] - start - 1)
        labels[start + offset] = labels[start + offset - 1]
        broken, message = dataclasses.replace(graph, arc_label=labels), "duplicate label"
    elif kind == 1:  # a root label missing (replaced by a label outside the vocabulary)
        labels = graph.arc_label.copy()
        labels[pick % graph.vocab_size] = graph.vocab_size
        broken, message = dataclasses.replace(graph, arc_label=labels), "outside the vocabulary"
    else:  # a backoff cycle
        if graph.num_states < 3:
            return
        first = 1 + pick % (graph.num_states - 1)
        second = 1 + (first + pick // 7) % (graph.num_states - 1)
        second = second if second != first else (first % (graph.num_states - 1)) + 1
        backoff = graph.backoff_to.copy()
        backoff[first], backoff[second] = second, first
        broken, message = dataclasses.replace(graph, backoff_to=backoff), "never reaches the root"
    with pytest.raises(GraphValidationError, match=message):
        broken.validate()
