"""Our arrays inside NeMo 3.0.0: equivalence with NeMo's own tree, acceptance by GPUBiasingMultiModel."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.context_biasing.boosting_graph_batched import GPUBoostingTreeModel
from nemo.collections.asr.parts.context_biasing.context_graph_universal import ContextGraph

from biasing.compile import build_graph
from biasing.graph import GraphMode, GraphParams
from biasing.nemo.compat import to_nemo_model
from tests.biasing.biasing_helpers import WORDS, nemo_totals

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
cased_words = st.sampled_from(WORDS).flatmap(lambda w: st.sampled_from([w, w.capitalize(), w.upper()]))
phrases = st.lists(cased_words, min_size=1, max_size=3).map(" ".join)


def nemo_tree(sp, texts: list[str]) -> GPUBoostingTreeModel:
    """NeMo's own builder, as BoostingTreeModelConfig defaults drive it for RNNT (cs=1, depth_scaling=2)."""
    graph = ContextGraph(context_score=1.0, depth_scaling=2.0)
    token_ids = [sp.encode(text) for text in texts]
    graph.build(token_ids=token_ids, phrases=texts, scores=[0.0] * len(texts), uniform_weights=False)
    return GPUBoostingTreeModel.from_context_graph(
        graph, vocab_size=sp.get_piece_size(), unk_score=0.0, final_eos_score=1.0, use_triton=False
    )


def model_totals(model, sequences: list[list[int]]) -> np.ndarray:
    with torch.inference_mode():
        scores = model.score_sentences(torch.tensor(sequences))
    return scores.cumsum(dim=1).numpy()


@SETTINGS
@given(texts=st.lists(phrases, min_size=1, max_size=5), seed=st.integers(0, 2**16))
def test_case_sensitive_tree_equals_nemo_tree(bpe, texts, seed) -> None:
    ours = build_graph(texts, bpe, GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE))
    rng = random.Random(seed)
    sequences = []
    for _ in range(6):
        labels: list[int] = []
        while len(labels) < 24:
            ids = bpe.encode(rng.choice(texts))
            labels += ids[: rng.randint(1, len(ids))] if rng.random() < 0.4 else ids
            labels += [rng.randrange(bpe.get_piece_size()) for _ in range(rng.randint(0, 2))]
        sequences.append(labels[:24])
    expected = model_totals(nemo_tree(bpe, texts), sequences)
    np.testing.assert_allclose(model_totals(to_nemo_model(ours), sequences), expected, rtol=1e-5, atol=1e-4)


def test_multi_model_accepts_graphs_and_keeps_them_apart(bpe) -> None:
    vocab = bpe.get_piece_size()
    graphs = [build_graph(["linezolid", "acme group"], bpe), build_graph(["Husqvarna"], bpe)]
    multi = GPUBiasingMultiModel(vocab_size=vocab, use_triton=False)
    ids = [multi.add_model(to_nemo_model(g, vocab_size=vocab), alpha=0.5) for g in graphs]
    sequences = [bpe.encode("the Linezolid acme group"), bpe.encode("HUSQVARNA")]
    for model_id, graph, labels in zip(ids, graphs, sequences, strict=True):
        with torch.inference_mode():
            states = multi.get_init_states(1)
            running = 0.0
            for label in labels:
                scores, next_states = multi.advance(states, torch.tensor([model_id]))
                running += float(scores[0, label])
                states = next_states[:, label]
        assert running == pytest.approx(0.5 * nemo_totals(graph, [labels])[0, -1], rel=1e-5)
        assert running > 0


def test_nemo_tokenizer_and_raw_processor_give_the_same_graph(bpe, bpe_model_path) -> None:
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    wrapped = SentencePieceTokenizer(model_path=str(bpe_model_path))
    assert wrapped.vocab_size == bpe.get_piece_size()
    ours, raw = (
        build_graph(["Linezolid", "acme group"], wrapped),
        build_graph(["Linezolid", "acme group"], bpe),
    )
    for name, array in raw.arrays().items():
        np.testing.assert_array_equal(ours.arrays()[name], array)


@SETTINGS
@given(
    texts=st.lists(st.lists(phrases, min_size=1, max_size=4), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_sparse_advance_equals_nemo_advance_plus_word_end_refunds(bpe, texts, seed) -> None:
    """NeMo's scores where a label starts a word (or the model is NeMo's own tree); where it continues the
    word, our graphs' word-end rule (``GraphScorer``, checked against a plain loop) after NeMo's storage
    shifted on a removal."""
    from biasing.nemo.multi_model import SparseAdvanceMultiModel
    from biasing.scorer import GraphScorer

    vocab = bpe.get_piece_size()
    nemo_multi = GPUBiasingMultiModel(vocab_size=vocab, use_triton=False)
    ours = SparseAdvanceMultiModel(vocab_size=vocab, use_triton=False)
    sizes, model_ids, scorers = [], [], []
    for index, group in enumerate(texts):
        graph = build_graph(group, bpe) if index % 2 == 0 else None
        model = to_nemo_model(graph) if graph is not None else nemo_tree(bpe, group)
        model_ids.append(nemo_multi.add_model(model, alpha=0.5 + index))
        assert ours.add_model(model, alpha=0.5 + index) == model_ids[-1]
        sizes.append(model.num_states)
        scorers.append(GraphScorer(graph, alpha=0.5 + index) if graph is not None else None)
    if len(model_ids) > 2:  # exercise NeMo's shifting of the storage on removal
        nemo_multi.remove_model(model_ids[1])
        ours.remove_model(model_ids[1])
        del model_ids[1], sizes[1], scorers[1]
    rng = random.Random(seed)
    rows = [rng.randrange(-1, len(model_ids)) for _ in range(32)]
    ids = torch.tensor([model_ids[r] if r >= 0 else -1 for r in rows])
    states = torch.tensor([rng.randrange(sizes[r]) if r >= 0 else 0 for r in rows])
    with torch.inference_mode():
        expected_scores, expected_states = nemo_multi.advance(states, ids)
        scores, next_states = ours.advance(states, ids)
    expected_scores = expected_scores.clone()
    for row, r in enumerate(rows):
        scorer = scorers[r] if r >= 0 else None
        if scorer is not None:
            expected_scores[row] = torch.from_numpy(scorer.scores(int(states[row]))[0].copy())
    torch.testing.assert_close(scores, expected_scores)
    torch.testing.assert_close(next_states, expected_states)


def test_label_looping_decoding_is_unchanged_by_sparse_advance(bpe) -> None:
    from nemo.collections.asr.modules import RNNTDecoder, RNNTJoint
    from nemo.collections.asr.parts.submodules.transducer_decoding.rnnt_label_looping import (
        GreedyBatchedRNNTLabelLoopingComputer,
    )

    from biasing.nemo.multi_model import SparseAdvanceMultiModel, install_sparse_advance

    torch.manual_seed(0)
    vocab = bpe.get_piece_size()
    prednet = {"pred_hidden": 32, "pred_rnn_layers": 1, "dropout": 0.0}
    decoder = RNNTDecoder(prednet=prednet, vocab_size=vocab, blank_as_pad=True).eval()
    jointnet = {"encoder_hidden": 16, "pred_hidden": 32, "joint_hidden": 32, "activation": "relu"}
    joint = RNNTJoint(jointnet=jointnet, num_classes=vocab).eval()
    computers = []
    for sparse in (False, True):
        computer = GreedyBatchedRNNTLabelLoopingComputer(
            decoder,
            joint,
            blank_index=vocab,
            max_symbols_per_step=3,
            allow_cuda_graphs=False,
            enable_per_stream_biasing=True,
        )
        if sparse:
            assert isinstance(install_sparse_advance(computer), SparseAdvanceMultiModel)
        computers.append(computer)
    graphs = [build_graph(["linezolid", "acme group"], bpe), build_graph(["Husqvarna"], bpe)]
    for computer in computers:
        for graph in graphs:
            computer.biasing_multi_model.add_model(to_nemo_model(graph), alpha=3.0)
    encoder_output = torch.randn(6, 20, 16)
    lengths = torch.tensor([20, 20, 15, 20, 7, 20])
    ids = torch.tensor([0, 1, -1, 0, 1, 1])
    with torch.inference_mode():
        results = [computer(encoder_output, lengths, multi_biasing_ids=ids)[0] for computer in computers]
        unbiased = computers[1](encoder_output, lengths, multi_biasing_ids=torch.full([6], -1))[0]
    assert not torch.equal(unbiased.scores, results[1].scores)  # the vocabularies did take part
    torch.testing.assert_close(results[0].current_lengths, results[1].current_lengths)
    torch.testing.assert_close(results[0].transcript, results[1].transcript)
    torch.testing.assert_close(results[0].scores, results[1].scores)
