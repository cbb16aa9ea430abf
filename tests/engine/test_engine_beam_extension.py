"""Our per-stream extension of NeMo's MALSD beam computers agrees with NeMo 3.0.0 itself: in one batch, a row
without a list decodes like NeMo's plain beam search and a row with a list like NeMo's beam search with that
list as its single fusion model (same alpha, ``lm_weighted_full``, late pruning)."""

from __future__ import annotations

import torch
from nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer import ModifiedALSDBatchedRNNTComputer
from nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer import ModifiedALSDBatchedTDTComputer
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import BlankLMScoreMode, PruningMode

from backend.engine import Engine
from backend.engine.beam import tdt_durations
from backend.engine.vocabulary import normalized
from tests.engine.conftest import noise

TERMS = (["recaca", "cahe", "linezolid"], ["reum he", "husqvarna"])


def stock_computer(asr_model, beam_size: int, fusion_model=None, alpha: float = 0.0):  # type: ignore[no-untyped-def]
    kwargs = {
        "decoder": asr_model.decoder,
        "joint": asr_model.joint,
        "blank_index": asr_model.decoder.blank_idx,
        "beam_size": beam_size,
        "max_symbols_per_step": 3,
        "allow_cuda_graphs": False,
    }
    if fusion_model is not None:
        kwargs.update(
            fusion_models=[fusion_model],
            fusion_models_alpha=[alpha],
            blank_lm_score_mode=BlankLMScoreMode.LM_WEIGHTED_FULL,
            pruning_mode=PruningMode.LATE,
        )
    durations = tdt_durations(asr_model)
    if durations is None:
        return ModifiedALSDBatchedRNNTComputer(**kwargs)
    return ModifiedALSDBatchedTDTComputer(durations=durations, **kwargs)


def encode(asr_model, seeds: list[int], seconds: float) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[no-untyped-def]
    audio = torch.stack([torch.from_numpy(noise(seed, seconds)) for seed in seeds])
    lengths = torch.full([len(seeds)], audio.shape[1])
    features, feature_lengths = asr_model.preprocessor(input_signal=audio, length=lengths)
    encoded, encoded_lengths = asr_model.encoder(audio_signal=features, length=feature_lengths)
    return encoded.transpose(1, 2), encoded_lengths


def best(hyps) -> list[tuple[list[int], float]]:  # type: ignore[no-untyped-def]
    return [(h.y_sequence.tolist(), float(h.score)) for h in hyps.to_hyps_list()]


async def test_per_stream_rows_match_nemo_single_model_fusion(engine: Engine) -> None:
    decoder = engine._loaded_decoder()
    asr_model = decoder.wrapper.asr_model
    handles = [await engine.load_vocabulary(terms) for terms in TERMS]
    biasing = engine._biasing_registry()
    trees = [biasing.compile(normalized(terms, decoder.tokenizer)).model for terms in TERMS]
    alpha = engine.config.biasing_alpha
    beam = decoder._beam
    assert beam is not None
    ours = beam.search.computer
    # NeMo's fusion knows nothing of our word-end rule: switched off here, the routing alone is compared
    # (the rule itself: tests/biasing/test_biasing_nemo.py)
    decoder.multi_model.label_continues_word.zero_()
    with torch.inference_mode():
        encoded, lengths = encode(asr_model, [1, 1, 1], 3.0)  # same audio: rows differ only by list
        ours.biasing.row_model_ids = torch.tensor(
            [-1, handles[0].model_id, handles[1].model_id]
        ).repeat_interleave(ours.beam_size)
        try:
            got = best(ours(encoded, lengths)[0])
        finally:
            ours.biasing.row_model_ids = None
        want = [best(stock_computer(asr_model, ours.beam_size)(encoded[:1], lengths[:1])[0])[0]]
        for row, tree in zip((1, 2), trees, strict=True):
            computer = stock_computer(asr_model, ours.beam_size, tree, alpha)
            want.append(best(computer(encoded[row : row + 1], lengths[row : row + 1])[0])[0])
    for (got_labels, got_score), (want_labels, want_score) in zip(got, want, strict=True):
        assert got_labels == want_labels
        assert abs(got_score - want_score) < 1e-3
    assert got[1][0] != got[0][0] or got[2][0] != got[0][0]  # the lists changed something
    for handle in handles:
        handle.release()
