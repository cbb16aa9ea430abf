"""The n-gram LM in beam search: our per-stream computer with an LM agrees with NeMo 3.0.0's own MALSD fusion
(LM alone for a row without a list, [list, LM] for a row with one), the LM really steers the beams, batching
still changes nothing, and an LM that does not fit the model is refused at start-up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio
import torch

from backend.engine import Engine, EngineConfig, EngineError
from backend.engine.vocabulary import normalized
from tests.engine.conftest import running
from tests.engine.test_engine_beam_extension import TERMS, best, encode, stock_computer
from tests.engine.test_engine_equivalence import PLANS, outputs, run_batched, run_stream, with_decoding

LM_ALPHA = 0.8
TOKEN_OFFSET = 100  # NeMo's default for token-level ARPA files: label i is the character chr(i + 100)


def write_arpa(path: Path, vocab_size: int, favoured: int) -> Path:
    """A bigram ARPA LM over ``vocab_size`` labels that strongly prefers label ``favoured``."""
    words = [chr(i + TOKEN_OFFSET) for i in range(vocab_size)]
    unigrams = ["-99\t<unk>\t0", "-99\t<s>\t0", "-1.0\t</s>\t0"]
    unigrams += [f"{-0.05 if i == favoured else -3.0}\t{w}\t0" for i, w in enumerate(words)]
    bigrams = [f"-0.01\t<s> {words[favoured]}", f"-0.01\t{words[favoured]} {words[favoured]}"]
    path.write_text(
        "\\data\\\n"
        f"ngram 1={len(unigrams)}\nngram 2={len(bigrams)}\n\n"
        "\\1-grams:\n" + "\n".join(unigrams) + "\n\n\\2-grams:\n" + "\n".join(bigrams) + "\n\n\\end\\\n"
    )
    return path


def vocab_size(model_path: Path) -> int:
    from nemo.collections.asr.models import ASRModel

    return int(ASRModel.restore_from(str(model_path), map_location="cpu").decoder.blank_idx)


@pytest.fixture(scope="module")
def lm_arpa(rnnt_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_arpa(tmp_path_factory.mktemp("lm") / "lm.arpa", vocab_size(rnnt_model), favoured=3)


@pytest_asyncio.fixture
async def lm_engine(rnnt_model: Path, lm_arpa: Path) -> AsyncIterator[Engine]:
    config = EngineConfig(
        model=str(rnnt_model),
        biasing_alpha=3.0,
        max_symbols_per_step=3,
        lm_path=str(lm_arpa),
        lm_alpha=LM_ALPHA,
    )
    async with running(config) as engine:
        yield engine


async def test_rows_with_the_lm_match_nemo_fusion(lm_engine: Engine) -> None:
    decoder = lm_engine._loaded_decoder()
    asr_model = decoder.wrapper.asr_model
    assert decoder._beam is not None
    ours = decoder._beam.search.computer
    lm = ours.fusion_models[1]
    handles = [await lm_engine.load_vocabulary(terms) for terms in TERMS]
    tree = lm_engine._biasing_registry().compile(normalized(TERMS[0], decoder.tokenizer)).model
    alpha = lm_engine.config.biasing_alpha
    decoder.multi_model.label_continues_word.zero_()  # NeMo's fusion has no word-end rule: compare without
    with torch.inference_mode():
        encoded, lengths = encode(asr_model, [1, 1], 3.0)
        ours.biasing.row_model_ids = torch.tensor([-1, handles[0].model_id]).repeat_interleave(ours.beam_size)
        try:
            got = best(ours(encoded, lengths)[0])
        finally:
            ours.biasing.row_model_ids = None
        lm_only = stock_computer(asr_model, ours.beam_size, lm, LM_ALPHA)
        both = stock_computer(asr_model, ours.beam_size, tree, alpha)
        both.fusion_models, both.fusion_models_alpha = [tree, lm], [alpha, LM_ALPHA]
        want = [best(lm_only(encoded[:1], lengths[:1])[0])[0], best(both(encoded[1:], lengths[1:])[0])[0]]
        without_lm = best(stock_computer(asr_model, ours.beam_size)(encoded[:1], lengths[:1])[0])[0]
    for (got_labels, got_score), (want_labels, want_score) in zip(got, want, strict=True):
        assert got_labels == want_labels
        assert abs(got_score - want_score) < 1e-3
    assert got[0][0] != without_lm[0]  # the LM changed the beams
    for handle in handles:
        handle.release()


async def test_the_lm_steers_beam_streams_and_batching_changes_nothing(
    lm_engine: Engine, rnnt_model: Path
) -> None:
    plans = with_decoding(PLANS, "beam")
    handles = {"a": await lm_engine.load_vocabulary(TERMS[0]), "b": await lm_engine.load_vocabulary(TERMS[1])}
    batched = await run_batched(lm_engine, plans, handles)
    alone = [await run_stream(lm_engine, plan, handles) for plan in plans]
    for plan, got, want in zip(plans, batched, alone, strict=True):
        assert outputs(got) == outputs(want), plan
    for handle in handles.values():
        handle.release()

    no_lm = EngineConfig(model=str(rnnt_model), biasing_alpha=3.0, max_symbols_per_step=3)
    async with running(no_lm) as plain:
        without_lm = [await run_stream(plain, plan, {}) for plan in plans if plan.vocabulary is None]
    with_lm = [await run_stream(lm_engine, plan, {}) for plan in plans if plan.vocabulary is None]
    assert [outputs(r) for r in with_lm] != [outputs(r) for r in without_lm]


async def test_a_token_bonus_makes_lm_beams_emit_more_labels(lm_engine: Engine) -> None:
    plain = lm_engine._loaded_decoder()
    asr_model = plain.wrapper.asr_model
    assert plain._beam is not None
    async with running(replace(lm_engine.config, lm_token_bonus=5.0)) as bonus_engine:
        boosted = bonus_engine._loaded_decoder()._beam
        assert boosted is not None
        results = []
        with torch.inference_mode():
            encoded, lengths = encode(asr_model, [1, 2], 3.0)
            for computer in (plain._beam.search.computer, boosted.search.computer):
                computer.biasing.row_model_ids = torch.full([2 * computer.beam_size], -1)  # no lists
                try:
                    results.append(best(computer(encoded, lengths)[0]))
                finally:
                    computer.biasing.row_model_ids = None
        without, with_bonus = results
    for (labels_with, _), (labels_without, _) in zip(with_bonus, without, strict=True):
        assert len(labels_with) > len(labels_without)


async def test_without_an_lm_the_token_bonus_is_not_applied(rnnt_model: Path) -> None:
    config = EngineConfig(model=str(rnnt_model), max_symbols_per_step=3, lm_token_bonus=5.0)
    async with running(config) as engine:
        beam = engine._loaded_decoder()._beam
        assert beam is not None
        assert beam.search.computer.lm_token_bonus == 0.0


def test_lm_token_bonus_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="lm_token_bonus"):
        EngineConfig(model="m.nemo", lm_token_bonus=-0.5)


async def test_an_lm_for_another_vocabulary_is_refused(rnnt_model: Path, tmp_path: Path) -> None:
    arpa = write_arpa(tmp_path / "big.arpa", vocab_size(rnnt_model) + 50, favoured=3)
    engine = Engine(EngineConfig(model=str(rnnt_model), lm_path=str(arpa)))
    with pytest.raises(EngineError, match="language model"):
        await engine.start()
    await engine.stop()


def test_lm_alpha_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="lm_alpha"):
        EngineConfig(model="m.nemo", lm_alpha=-0.1)


async def test_chunk_calls_end_with_the_beams_of_one_call(lm_engine: Engine) -> None:
    """A stream's frames in chunk calls, each beam resuming from the frame it stopped at, end with the same
    beams (labels, frames, scores) as one call over all the frames."""
    decoder = lm_engine._loaded_decoder()
    assert decoder._beam is not None
    search = decoder._beam.search
    with torch.inference_mode():
        encoded, lengths = encode(decoder.wrapper.asr_model, [4], 6.0)
        total = int(lengths[0])
        one = search.initial_state(encoded.device)
        search.decode([one], encoded, lengths, [-1], [True])
        chunked, lags = search.initial_state(encoded.device), []
        for start in range(0, total, 3):
            part = encoded[:, start : start + 3]
            search.decode([chunked], part, torch.tensor([part.shape[1]]), [-1], [start + 3 >= total])
            lags.append(int(chunked.lags.max()))
    want, got = one.histories[search.best_beam(one)], chunked.histories[search.best_beam(chunked)]
    assert len(want) >= 3
    assert [(t.label, t.start_frame, t.end_frame) for t in got] == [
        (t.label, t.start_frame, t.end_frame) for t in want
    ]
    torch.testing.assert_close(chunked.scores, one.scores, atol=1e-3, rtol=0)
    assert chunked.decoded_frames == one.decoded_frames == total
    assert max(lags[:-1]) > 0  # some beams did stop behind a chunk end and resumed there
