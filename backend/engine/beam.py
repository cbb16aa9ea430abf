"""Streaming beam search with per-stream biasing: our thin extension of NeMo 3.0.0's batched MALSD computers.

Adapted from NeMo 3.0.0 (``nemo_toolkit[asr]==3.0.0``):
``nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer.ModifiedALSDBatchedRNNTComputer`` and
``nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer.ModifiedALSDBatchedTDTComputer``, with
``GPUBiasingMultiModel`` (``parts/context_biasing/biasing_multi_model.py``). What NeMo 3.0.0 lacks and this
module adds:

- per-stream biasing in beam search: ``RowRoutedBiasing`` makes the multi-model look like one fusion model,
  routing every row (``stream * beam + k``) to its stream's model id; ``topk_fusion_model`` is overridden so
  the ``lm_weighted_full`` blank weighting uses each row's own alpha (0 for rows without a list) instead of
  NeMo's single scalar sum (which would change unbiased streams);
- per-stream split/merge of ``BatchedBeamState``, so streams join, skip steps and leave at any step (rows with
  no new frames never enter a call: the RNNT computer decodes padding for zero-length rows);
- an optional token-level n-gram LM (NeMo's ``NGramGPULanguageModel``) as a second fusion model, shared by
  every stream, with its own weight added to each row's blank weighting; its state restarts at <s> with
  each utterance (the LM was trained on sentences);
- per-beam token histories across chunks (``BatchedBeamHyps.flatten_`` root pointers), the best beam as the
  partial, end of utterance on trailing blanks of the best beam, and a per-utterance restart of scores from
  the best beam (cumulative scores dilute length normalisation).

Only ``pruning_mode=late`` is supported (NeMo's decoding-config default). Everything runs on the decode thread
under ``torch.inference_mode()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer import ModifiedALSDBatchedRNNTComputer
from nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer import ModifiedALSDBatchedTDTComputer
from nemo.collections.asr.parts.submodules.transducer_decoding.label_looping_base import BatchedBeamState
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import (
    INACTIVE_SCORE,
    INIT_HASH_VALUE,
    BlankLMScoreMode,
    PruningMode,
)

_EPS = 1e-2  # NeMo's clamp for log(1 - p(blank)) (bf16-safe)


class RowRoutedBiasing:
    """The biasing multi-model as a single fusion model of the MALSD computers: ``advance(states)`` uses the
    per-row model ids set for the current call (stream ids repeated ``beam`` times; -1 = no biasing)."""

    def __init__(self, multi_model: GPUBiasingMultiModel) -> None:
        self.multi_model = multi_model
        self.row_model_ids: torch.Tensor | None = None

    def to(self, device: torch.device) -> RowRoutedBiasing:
        """Device moves are the engine's business (the multi-model lives on the decoder's device)."""
        return self

    def get_init_states(self, batch_size: int, bos: bool = True) -> torch.Tensor:
        return self.multi_model.get_init_states(batch_size=batch_size, bos=bos)

    def advance(self, states: torch.Tensor, eos_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.row_model_ids is None or self.row_model_ids.shape[0] != states.shape[0]:
            raise RuntimeError("row model ids are not set for this beam call")
        return self.multi_model.advance(states, self.row_model_ids)

    def row_alpha(self, batch_size: int, beam_size: int) -> torch.Tensor:
        """Each row's biasing weight, [batch, beam]; 0 for rows without a list."""
        if self.row_model_ids is None:
            raise RuntimeError("row model ids are not set for this beam call")
        ids = self.row_model_ids
        alpha = self.multi_model.model2alpha[ids.clamp(min=0)]
        return torch.where(ids >= 0, alpha, torch.zeros_like(alpha)).view(batch_size, beam_size)


class _PerStreamFusion:
    """Fusion scoring shared by our RNNT and TDT computers: ``lm_weighted_full`` blank weighting with each
    row's own alpha (its list's, 0 without a list, plus the LM's) instead of NeMo's single scalar sum."""

    biasing: RowRoutedBiasing
    lm_alpha: float = 0.0
    lm_token_bonus: float = 0.0  # added to non-blank labels when the LM is fused (0: NeMo's scoring)
    beam_size: int
    blank_lm_score_mode: BlankLMScoreMode

    def _fuse(self, fusion_scores_list: list[torch.Tensor], log_probs: torch.Tensor, eps: float) -> None:
        """Add the fusion scores to ``log_probs`` [batch, beam, V + 1] in place (NeMo 3.0.0
        ``topk_fusion_model``, late pruning)."""
        if self.blank_lm_score_mode is BlankLMScoreMode.LM_WEIGHTED_FULL:
            alpha = self.biasing.row_alpha(log_probs.shape[0], self.beam_size) + self.lm_alpha
            blank_logprob = log_probs[..., -1]
            non_blank_logprob = torch.log1p(-torch.clamp(torch.exp(blank_logprob), max=1.0 - eps))
            log_probs[..., :-1] += non_blank_logprob.unsqueeze(-1) * alpha.unsqueeze(-1)
            log_probs[..., -1] *= 1 + alpha
        log_probs[..., :-1] += sum(fusion_scores_list)
        if self.lm_token_bonus:
            log_probs[..., :-1] += self.lm_token_bonus


class PerStreamRNNTBeamComputer(_PerStreamFusion, ModifiedALSDBatchedRNNTComputer):
    """NeMo 3.0.0 ``ModifiedALSDBatchedRNNTComputer`` whose fusion scoring is per stream."""

    def topk_fusion_model(self, fusion_scores_list, log_probs, eps=_EPS):
        self._fuse(fusion_scores_list, log_probs, eps)
        return torch.topk(log_probs, self.beam_size, dim=-1, largest=True, sorted=True)


class PerStreamTDTBeamComputer(_PerStreamFusion, ModifiedALSDBatchedTDTComputer):
    """NeMo 3.0.0 ``ModifiedALSDBatchedTDTComputer`` whose fusion scoring is per stream."""

    def topk_fusion_model(self, fusion_scores_list, log_probs, duration_log_probs, eps=_EPS):
        self._fuse(fusion_scores_list, log_probs, eps)
        batch_size = log_probs.shape[0]
        total_log_probs = log_probs[:, :, :, None] + duration_log_probs[:, :, None, :]
        log_probs_top_k, total_idx_top_k = torch.topk(
            total_log_probs.view(batch_size, self.beam_size, -1),
            self.beam_size,
            dim=-1,
            largest=True,
            sorted=True,
        )
        return log_probs_top_k, total_idx_top_k // len(self.durations), total_idx_top_k % len(self.durations)


def tdt_durations(asr_model: Any) -> list[int] | None:
    """The model's TDT durations, or None for a plain RNNT model."""
    if getattr(asr_model.joint, "num_extra_outputs", 0) <= 0:
        return None
    cfg = asr_model.cfg
    durations = cfg.get("model_defaults", {}).get("tdt_durations") or cfg.decoding.get("durations")
    if not durations:
        raise ValueError("the model's joint has extra outputs but no TDT durations in its config")
    return list(durations)


def build_beam_computer(
    asr_model: Any,
    multi_model: GPUBiasingMultiModel,
    beam_size: int,
    max_symbols: int,
    lm: Any = None,
    lm_alpha: float = 0.0,
    lm_token_bonus: float = 0.0,
):
    """A batched MALSD computer (RNNT or TDT) over the model's decoder/joint with per-stream biasing and,
    optionally, a token n-gram LM (``lm``, weight ``lm_alpha``, and ``lm_token_bonus`` added to every
    non-blank label while it is fused). Fusion models: [biasing, lm]."""
    biasing = RowRoutedBiasing(multi_model)
    fusion_models: list[Any] = [biasing]
    alphas = [1.0]  # the multi-model applies each model's alpha itself
    if lm is not None and lm_alpha > 0:
        fusion_models.append(lm)
        alphas.append(lm_alpha)
    common = {
        "decoder": asr_model.decoder,
        "joint": asr_model.joint,
        "blank_index": asr_model.decoder.blank_idx,
        "beam_size": beam_size,
        "max_symbols_per_step": max_symbols,
        "fusion_models": fusion_models,
        "fusion_models_alpha": alphas,
        "blank_lm_score_mode": BlankLMScoreMode.LM_WEIGHTED_FULL,
        "pruning_mode": PruningMode.LATE,
        "allow_cuda_graphs": False,  # per-row routing is not captured in NeMo's CUDA graphs
    }
    durations = tdt_durations(asr_model)
    if durations is None:
        computer = PerStreamRNNTBeamComputer(**common)
    else:
        computer = PerStreamTDTBeamComputer(durations=durations, **common)
    computer.biasing = biasing
    computer.lm_alpha = alphas[1] if len(alphas) > 1 else 0.0
    computer.lm_token_bonus = lm_token_bonus if len(alphas) > 1 else 0.0
    return computer


@dataclass
class Token:
    """One emitted label with its frames (global encoder frame indices from the stream start)."""

    label: int
    start_frame: int
    end_frame: int


@dataclass
class BeamStreamState:
    """One stream's beams between chunks: the computer's per-row state and each beam's tokens since the
    start of the current utterance."""

    predictor_rows: list[Any]
    predictor_outputs: torch.Tensor  # [beam, 1, D]
    labels: torch.Tensor  # [beam]
    scores: torch.Tensor  # [beam]
    transcript_hash: torch.Tensor  # [beam]
    current_lengths_nb: torch.Tensor  # [beam]
    last_timestamp_lasts: torch.Tensor  # [beam]
    fusion_states: list[torch.Tensor]  # per fusion model (biasing, then the LM if any): [beam]
    time_jumps: torch.Tensor | None  # [beam] (TDT)
    decoded_frames: int = 0
    histories: list[list[Token]] = field(default_factory=list)


class BeamSearch:
    """Merges per-stream beam states into one batched MALSD call and splits the result back."""

    def __init__(self, computer: Any) -> None:
        self.computer = computer
        self.beam_size: int = computer.beam_size
        self.is_tdt = isinstance(computer, PerStreamTDTBeamComputer)

    def initial_state(self, device: torch.device) -> BeamStreamState:
        """Beams of a new stream: the state after <SOS>, one live beam, biasing at its start state."""
        beam, decoder = self.beam_size, self.computer.decoder
        sos = torch.full([beam, 1], fill_value=self.computer._SOS, device=device, dtype=torch.long)
        decoder_output, predictor_state, *_ = decoder.predict(sos, None, add_sos=False, batch_size=beam)
        scores = torch.full([beam], INACTIVE_SCORE, device=device)
        scores[0] = 0.0
        zeros = torch.zeros([beam], device=device, dtype=torch.long)
        return BeamStreamState(
            predictor_rows=decoder.batch_split_states(predictor_state),
            predictor_outputs=self.computer.joint.project_prednet(decoder_output),
            labels=sos.view(-1).clone(),
            scores=scores,
            transcript_hash=torch.full_like(zeros, INIT_HASH_VALUE),
            current_lengths_nb=zeros.clone(),
            last_timestamp_lasts=zeros.clone(),
            fusion_states=[self._start_states(model, device) for model in self.computer.fusion_models],
            time_jumps=zeros.clone() if self.is_tdt else None,
            histories=[[] for _ in range(beam)],
        )

    def decode(
        self,
        states: list[BeamStreamState],
        encoder_output: torch.Tensor,
        encoder_lengths: torch.Tensor,
        model_ids: list[int],
    ) -> None:
        """Advance every stream's beams over its frames (``encoder_output`` [B, T, D], every length > 0)."""
        if int(encoder_lengths.min()) <= 0:
            raise ValueError("streams without new frames must not enter a beam call")
        device = encoder_output.device
        ids = torch.tensor(model_ids, dtype=torch.long, device=device)
        self.computer.biasing.row_model_ids = ids.repeat_interleave(self.beam_size)
        try:
            hyps, batched = self.computer(encoder_output, encoder_lengths, self._merge(states))
        finally:
            self.computer.biasing.row_model_ids = None
        root_ptrs = hyps.flatten_()
        self._split(batched, states)
        self._extend_histories(hyps, root_ptrs, states)

    def best_beam(self, state: BeamStreamState) -> int:
        """Index of the best beam by length-normalised score (NeMo's ``flatten_sort_`` criterion)."""
        normalized = state.scores / (state.current_lengths_nb.to(state.scores.dtype) + 1)
        return int(torch.argmax(normalized))

    def restart_utterance(self, state: BeamStreamState, beam: int) -> None:
        """Continue from ``beam`` alone with score 0 and an empty history (a new utterance)."""
        rows = [beam] * self.beam_size
        state.predictor_rows = [state.predictor_rows[beam] for _ in rows]
        state.predictor_outputs = state.predictor_outputs[rows].clone()
        state.labels = state.labels[rows].clone()
        biasing = state.fusion_states[0]
        state.fusion_states = [biasing[rows].clone()]  # a term in progress carries over; the LM restarts
        for lm in self.computer.fusion_models[1:]:
            state.fusion_states.append(self._start_states(lm, biasing.device))
        state.last_timestamp_lasts = state.last_timestamp_lasts[rows].clone()
        if state.time_jumps is not None:
            state.time_jumps = state.time_jumps[rows].clone()
        state.scores = torch.full_like(state.scores, INACTIVE_SCORE)
        state.scores[0] = 0.0
        state.transcript_hash = torch.full_like(state.transcript_hash, INIT_HASH_VALUE)
        state.current_lengths_nb = torch.zeros_like(state.current_lengths_nb)
        state.histories = [[] for _ in rows]

    def reset_biasing(self, state: BeamStreamState) -> None:
        """Every beam's biasing state back to the start (the stream's vocabulary changed)."""
        state.fusion_states[0] = self._start_states(self.computer.biasing, state.fusion_states[0].device)

    def _start_states(self, model: Any, device: torch.device) -> torch.Tensor:
        """A fusion model's start (<s>) state for each beam."""
        return model.get_init_states(batch_size=self.beam_size, bos=True).to(device)

    def _merge(self, states: list[BeamStreamState]) -> BatchedBeamState:
        decoder = self.computer.decoder
        return BatchedBeamState(
            predictor_states=decoder.batch_unsplit_states([row for s in states for row in s.predictor_rows]),
            predictor_outputs=torch.cat([s.predictor_outputs for s in states]),
            labels=torch.stack([s.labels for s in states]),
            decoded_lengths=torch.tensor([s.decoded_frames for s in states], device=states[0].labels.device),
            fusion_states_list=[
                torch.cat(per_model) for per_model in zip(*(s.fusion_states for s in states), strict=True)
            ],
            time_jumps=torch.stack([s.time_jumps for s in states]) if self.is_tdt else None,
            scores=torch.stack([s.scores for s in states]),
            transcript_hash=torch.stack([s.transcript_hash for s in states]),
            current_lengths_nb=torch.stack([s.current_lengths_nb for s in states]),
            last_timestamp_lasts=torch.stack([s.last_timestamp_lasts for s in states]),
            transcript_prefix_hash=None,
        )

    def _split(self, batched: BatchedBeamState, states: list[BeamStreamState]) -> None:
        beam = self.beam_size
        rows = self.computer.decoder.batch_split_states(batched.predictor_states)
        fusion_states = [f.view(len(states), beam) for f in batched.fusion_states_list]
        outputs = batched.predictor_outputs.view(len(states), beam, *batched.predictor_outputs.shape[1:])
        for b, state in enumerate(states):
            state.predictor_rows = rows[b * beam : (b + 1) * beam]
            state.predictor_outputs = outputs[b].clone()
            state.labels = batched.labels[b].clone()
            state.scores = batched.scores[b].clone()
            state.transcript_hash = batched.transcript_hash[b].clone()
            state.current_lengths_nb = batched.current_lengths_nb[b].clone()
            state.last_timestamp_lasts = batched.last_timestamp_lasts[b].clone()
            state.fusion_states = [f[b].clone() for f in fusion_states]
            if self.is_tdt:
                state.time_jumps = batched.time_jumps[b].clone()
            state.decoded_frames = int(batched.decoded_lengths[b])

    def _extend_histories(self, hyps: Any, root_ptrs: torch.Tensor, states: list[BeamStreamState]) -> None:
        blank = self.computer._blank_index
        lengths = hyps.current_lengths_wb.tolist()
        labels_all = hyps.transcript_wb.tolist()
        times_all = hyps.timestamps.tolist()
        durations_all = hyps.token_durations.tolist() if self.is_tdt else None
        roots = root_ptrs.tolist()
        for b, state in enumerate(states):
            previous = state.histories
            histories = []
            for k in range(self.beam_size):
                tokens = list(previous[roots[b][k]])
                for i in range(lengths[b][k]):
                    label = labels_all[b][k][i]
                    if label < 0 or label == blank:
                        continue
                    end = times_all[b][k][i]
                    start = end - durations_all[b][k][i] if durations_all is not None else end
                    tokens.append(Token(label, start, max(end, start + 1) if durations_all is None else end))
                histories.append(tokens)
            state.histories = histories
