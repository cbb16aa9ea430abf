"""The TurboBias graph compiler over Whisper's byte-level BPE tokens (``captions_model.whisper_tokens``),
applied with ``biasing.scorer.GraphScorer``: every casing and segmentation Whisper can emit earns a term's
full score.

The tokenizer is the one shipped inside models/captions-final-pass.pt (its tokenizer.json text).
"""

from __future__ import annotations

import hashlib
import random
import string

import numpy as np
import pytest
import tokenizers

from biasing.compile import build_graph
from biasing.graph import GraphMode, GraphParams
from biasing.scorer import GraphScorer
from biasing.terms import TermValidationError
from biasing.tokenizer import WORD_BOUNDARY, GraphTokenizer, as_tokenizer
from captions_model.paths import FINAL_PASS_MODEL_PATH
from captions_model.whisper_tokens import WhisperTokenizerAdapter

DECODER_VOCAB = 51864  # Whisper tiny.en's logits width (the tokenizer has 50363 tokens with its specials)
TERMS = ["husqvarna", "globalsign", "voriconazole", "Karla Tolvanen"]


def _tokenizer_json() -> str:
    if not FINAL_PASS_MODEL_PATH.is_file():
        pytest.skip(f"{FINAL_PASS_MODEL_PATH} is not there")
    import torch

    checkpoint = torch.load(FINAL_PASS_MODEL_PATH, map_location="cpu", weights_only=True)
    text = checkpoint.get("tokenizer_json")
    assert text is not None, f"no tokenizer.json text inside {FINAL_PASS_MODEL_PATH}"
    return str(text)


@pytest.fixture(scope="module")
def tokenizer_json() -> str:
    return _tokenizer_json()


@pytest.fixture(scope="module")
def tok(tokenizer_json: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tokenizer_json)


@pytest.fixture(scope="module")
def adapter(tokenizer_json: str, tok: tokenizers.Tokenizer) -> WhisperTokenizerAdapter:
    eot = tok.token_to_id("<|endoftext|>")
    return WhisperTokenizerAdapter.from_json(tokenizer_json, eot, DECODER_VOCAB)


@pytest.fixture(scope="module")
def scorer(adapter: WhisperTokenizerAdapter) -> GraphScorer:
    return GraphScorer(build_graph(TERMS, adapter), alpha=1.0)


def encode(tok: tokenizers.Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def test_surfaces_follow_the_sentencepiece_conventions(adapter, tok, tokenizer_json) -> None:
    assert isinstance(adapter, GraphTokenizer) and as_tokenizer(adapter) is adapter
    assert adapter.vocab_size == DECODER_VOCAB == len(adapter.surfaces)
    assert adapter.surfaces[tok.token_to_id("ĠHus")] == WORD_BOUNDARY + "Hus"
    assert adapter.surfaces[tok.token_to_id("hus")] == "hus"
    assert adapter.surfaces[tok.token_to_id("Ġ")] == WORD_BOUNDARY
    eot = tok.token_to_id("<|endoftext|>")
    assert adapter.text_token_limit == eot
    assert all(surface == "" for surface in adapter.surfaces[eot:])
    assert adapter.surfaces[tok.token_to_id("Ã©")] == "é"  # GPT-2's printable stand-ins for the bytes C3 A9
    lone_bytes = [tok.token_to_id(chr(0xC3)), tok.token_to_id(chr(0xC4))]  # UTF-8 lead bytes on their own
    assert all(label is not None and adapter.surfaces[label] == "" for label in lone_bytes)
    assert adapter.pieces("husqvarna") == [WORD_BOUNDARY + "hus", "qv", "arna"]
    assert adapter.pieces("karla tolvanen")[0].startswith(WORD_BOUNDARY)
    assert "".join(adapter.pieces("karla tolvanen")) == "▁karla▁tolvanen"
    assert adapter.ids("husqvarna") == encode(tok, " husqvarna")
    batch = adapter.pieces_batch(["husqvarna", "globalsign"])
    assert batch == [adapter.pieces("husqvarna"), adapter.pieces("globalsign")]
    digest = hashlib.sha256(tokenizer_json.encode())
    digest.update(f"|vocab={DECODER_VOCAB}|text_tokens={adapter.text_token_limit}".encode())
    assert adapter.identity == digest.hexdigest()


def test_every_casing_and_segmentation_scores_the_same_full_score(scorer, tok) -> None:
    variants = [" Husqvarna", " HUSQVARNA", " husqvarna", " GlobalSign", " Globalsign", " GLOBALSIGN"]
    sequences = [encode(tok, text) for text in variants]
    assert len({tuple(s) for s in sequences}) == len(sequences)  # different token sequences...
    totals = [scorer.score_sequence(labels) for labels in sequences]
    assert totals[0] > 1.0
    np.testing.assert_allclose(totals, totals[0], atol=1e-4)  # ...one score (both terms have 3 greedy tokens)
    for labels in sequences:  # the end state is the phrase's end whichever path reached it
        assert scorer.graph.is_end[scorer.state_after(labels)]
    in_sentence = scorer.score_sequence(encode(tok, " We met the Husqvarna team today."))
    assert in_sentence == pytest.approx(totals[0], abs=1e-4)
    two_words = [scorer.score_sequence(encode(tok, text)) for text in (" Karla Tolvanen", " KARLA TOLVANEN")]
    assert two_words[0] > totals[0] and two_words[0] == pytest.approx(two_words[1], abs=1e-4)


def test_a_failed_partial_match_is_refunded_and_ordinary_text_scores_nothing(scorer, tok) -> None:
    partial = encode(tok, " Husq")
    assert scorer.score_sequence(partial) > 0
    assert scorer.score_sequence(encode(tok, " Husq and")) == pytest.approx(0.0, abs=1e-5)
    assert scorer.score_sequence(encode(tok, " Karla and Tom")) == pytest.approx(0.0, abs=1e-5)
    for text in (" The quarterly earnings call starts at nine.", " Thank you, everyone.", " I think so"):
        assert scorer.score_sequence(encode(tok, text)) == pytest.approx(0.0, abs=1e-5)
    refund = GraphScorer(scorer.graph, alpha=1.0, end="refund")  # an utterance ending inside a term
    assert refund.score_sequence(partial, final=True) == pytest.approx(0.0, abs=1e-5)
    done = encode(tok, " Husqvarna")
    bonus = float(scorer.graph.final_weight[refund.state_after(done)])
    assert refund.score_sequence(done, final=True) == pytest.approx(
        scorer.score_sequence(done) + bonus, abs=1e-4
    )


def test_dense_rows_match_single_steps(scorer, tok) -> None:
    state = scorer.initial_state()
    for label in encode(tok, " Globalsign and Husqvarna"):
        boost, next_state = scorer.scores(state)
        assert boost.shape == (DECODER_VOCAB,) and boost.dtype == np.float32
        assert scorer.step(state, label) == (float(boost[label]), int(next_state[label]))
        state = int(next_state[label])
    root = scorer.scores(0)[0]
    boosted = np.flatnonzero(root > 0)
    assert 0 < boosted.size < 100  # only tokens spelling the start of a term (with its leading space)
    assert all(scorer.graph.vocab_size > label for label in boosted)


def test_terms_whisper_cannot_spell_as_tokens_are_rejected(adapter) -> None:
    with pytest.raises(TermValidationError):
        build_graph(["\u0f00\u0f01\u0f02"], adapter)  # Tibetan: only byte pieces, no label spells a character


def test_case_sensitive_tree_compiles_too(adapter, tok) -> None:
    graph = build_graph(TERMS, adapter, GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE))
    tree = GraphScorer(graph, alpha=2.0)
    assert tree.score_sequence(encode(tok, " husqvarna")) > 0
    assert tree.score_sequence(encode(tok, " Husqvarna")) == 0.0  # the tree is case-sensitive


def test_200_terms_compile_over_the_whole_vocabulary(adapter) -> None:
    rng = random.Random(3)
    terms = {
        " ".join(
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 11)))
            for _ in range(rng.randint(1, 3))
        )
        for _ in range(200)
    }
    graph = build_graph(sorted(terms), adapter)
    assert graph.vocab_size == DECODER_VOCAB
    assert graph.num_states > sum(len(t.replace(" ", "")) for t in terms) // 2  # every term has its chain
