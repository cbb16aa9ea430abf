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
  the best beam (cumulative scores dilute length normalisation);
- RNNT chunk calls that stop where one long call would be: a stream's call ends when its first hypothesis
  passes the chunk end, and the others resume from their own frames in the next call
  (``PerStreamRNNTBeamComputer.decode_chunk``). NeMo's ``prev_batched_state`` continuation instead runs every
  hypothesis to the chunk end while the finished ones wait, which prunes words in progress at each chunk end.

Only ``pruning_mode=late`` is supported (NeMo's decoding-config default). Everything runs on the decode thread
under ``torch.inference_mode()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer import ModifiedALSDBatchedRNNTComputer
from nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer import ModifiedALSDBatchedTDTComputer
from nemo.collections.asr.parts.submodules.transducer_decoding.label_looping_base import BatchedBeamState
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import (
    INACTIVE_SCORE,
    INIT_HASH_VALUE,
    NON_EXISTENT_LABEL_VALUE,
    BatchedBeamHyps,
    BlankLMScoreMode,
    PruningMode,
    seed_batched_hyps_from_state,
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
        states: torch.Tensor = self.multi_model.get_init_states(batch_size=batch_size, bos=bos)
        return states

    def advance(self, states: torch.Tensor, eos_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.row_model_ids is None or self.row_model_ids.shape[0] != states.shape[0]:
            raise RuntimeError("row model ids are not set for this beam call")
        advanced: tuple[torch.Tensor, torch.Tensor] = self.multi_model.advance(states, self.row_model_ids)
        return advanced

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
    evidence_margin: float | None = None  # boost only labels within this of the model's best label (nats)
    beam_size: int
    blank_lm_score_mode: BlankLMScoreMode

    def _fuse(self, fusion_scores_list: list[torch.Tensor], log_probs: torch.Tensor, eps: float) -> None:
        """Add the fusion scores to ``log_probs`` [batch, beam, V + 1] in place (NeMo 3.0.0
        ``topk_fusion_model``, late pruning); the biasing boosts (fusion model 0) first pass the evidence
        gate."""
        if self.evidence_margin is not None:
            gated = self._gate(fusion_scores_list[0], log_probs[..., :-1], self.evidence_margin)
            fusion_scores_list = [gated, *fusion_scores_list[1:]]
        if self.blank_lm_score_mode is BlankLMScoreMode.LM_WEIGHTED_FULL:
            alpha = self.biasing.row_alpha(log_probs.shape[0], self.beam_size) + self.lm_alpha
            blank_logprob = log_probs[..., -1]
            non_blank_logprob = torch.log1p(-torch.clamp(torch.exp(blank_logprob), max=1.0 - eps))
            log_probs[..., :-1] += non_blank_logprob.unsqueeze(-1) * alpha.unsqueeze(-1)
            log_probs[..., -1] *= 1 + alpha
        log_probs[..., :-1] += sum(fusion_scores_list)
        if self.lm_token_bonus:
            log_probs[..., :-1] += self.lm_token_bonus

    @staticmethod
    def _gate(boost: torch.Tensor, label_log_probs: torch.Tensor, margin: float) -> torch.Tensor:
        """``boost`` [batch, beam, V] without its positive part where the model's own log-probability of the
        label is more than ``evidence_margin`` below its best non-blank label's: the audio does not support
        it. Refunds (negative scores) always apply."""
        best = label_log_probs.max(dim=-1, keepdim=True).values
        unsupported = (boost > 0) & (label_log_probs < best - margin)
        return boost.masked_fill(unsupported, 0.0)


class PerStreamRNNTBeamComputer(_PerStreamFusion, ModifiedALSDBatchedRNNTComputer):
    """NeMo 3.0.0 ``ModifiedALSDBatchedRNNTComputer`` whose fusion scoring is per stream, with chunk calls
    that end where one long call would be (``decode_chunk``)."""

    def topk_fusion_model(
        self, fusion_scores_list: list[torch.Tensor], log_probs: torch.Tensor, eps: float = _EPS
    ) -> Any:
        self._fuse(fusion_scores_list, log_probs, eps)
        return torch.topk(log_probs, self.beam_size, dim=-1, largest=True, sorted=True)

    def decode_chunk(
        self,
        encoder_output: torch.Tensor,
        encoder_output_length: torch.Tensor,
        prev_batched_state: BatchedBeamState | None,
        start_frames: torch.Tensor,
        open_rows: torch.Tensor,
        frame_offsets: torch.Tensor,
    ) -> tuple[BatchedBeamHyps, BatchedBeamState, torch.Tensor]:
        """NeMo 3.0.0 ``ModifiedALSDBatchedRNNTComputer.modified_alsd_torch`` (its loop unchanged), except:

        - each hypothesis starts at its own frame, ``start_frames`` [B, beam] (frames it has not consumed
          yet are at the start of ``encoder_output``, fed again);
        - a row in ``open_rows`` [B] (its stream goes on) stops as soon as one live hypothesis has passed
          the last frame, leaving the others where they are, instead of running every hypothesis to the end
          while the finished ones wait with their scores frozen. In alignment-length synchronous search
          that wait prunes hypotheses still emitting labels at the chunk end against finished ones that
          have not paid for the next frames yet: carried over 14-frame calls it cost 2 points of WER with
          the LM (truncated words: "All" -> "A", "white" -> "wit"). Stopping at the first one and resuming
          the rest from their frames gives exactly the transcripts of one call over all the frames;
        - ``frame_offsets`` [B]: the stream frame of each row's first frame (timestamps are global);
        - returns each hypothesis' next frame too, [B, beam] (past the last frame when it has finished).
        """
        batch_size, max_time, _ = encoder_output.shape
        device = encoder_output.device
        encoder_output_projected = self.joint.project_encoder(encoder_output)
        float_dtype = encoder_output_projected.dtype
        batched_hyps = BatchedBeamHyps(
            batch_size=batch_size,
            beam_size=self.beam_size,
            blank_index=self._blank_index,
            init_length=max_time * (self.max_symbols + 1) if self.max_symbols is not None else max_time,
            device=device,
            float_dtype=float_dtype,
        )
        batch_beam_indices = (
            torch.arange(batch_size, dtype=torch.long, device=device)[:, None]
            .expand(batch_size, self.beam_size)
            .clone()
        )
        batch_beam_beam_indices = (
            torch.arange(self.beam_size, dtype=torch.long, device=device)[None, :, None]
            .expand(batch_size, -1, self.beam_size)
            .clone()
        )
        if prev_batched_state is not None:
            seed_batched_hyps_from_state(batched_hyps, prev_batched_state)
        last_timesteps = torch.clamp_min(encoder_output_length - 1, 0)[:, None].expand_as(batch_beam_indices)
        time_indices = start_frames.clone()
        batched_hyps.next_timestamp.copy_(start_frames)  # the frames the tokens are stamped with
        safe_time_indices = torch.minimum(time_indices, last_timesteps)
        active_mask = (encoder_output_length > 0)[:, None].expand_as(batch_beam_indices) & (
            time_indices <= last_timesteps
        )
        stopped = torch.zeros_like(open_rows, dtype=torch.bool)[:, None]
        open_rows = open_rows[:, None]

        fusion_states_list, fusion_states_candidates_list, fusion_scores_list = [], [], []
        if prev_batched_state is None or not prev_batched_state.fusion_states_list:
            init_fusion_states = [
                fm.get_init_states(batch_size=batch_size * self.beam_size, bos=True)
                for fm in self.fusion_models
            ]
        else:
            init_fusion_states = [s.reshape(-1) for s in prev_batched_state.fusion_states_list]
        for fusion_model_idx, fusion_model in enumerate(self.fusion_models):
            fusion_states = init_fusion_states[fusion_model_idx]
            fusion_scores, fusion_states_candidates = fusion_model.advance(states=fusion_states)
            fusion_scores = (
                fusion_scores.to(dtype=float_dtype).view(batch_size, self.beam_size, -1)
                * self.fusion_models_alpha[fusion_model_idx]
            )
            fusion_states_list.append(fusion_states)
            fusion_states_candidates_list.append(fusion_states_candidates)
            fusion_scores_list.append(fusion_scores)

        if prev_batched_state is None:
            last_labels_wb = torch.full(
                [batch_size, self.beam_size], fill_value=self._SOS, device=device, dtype=torch.long
            )
            decoder_state = self.decoder.initialize_state(
                torch.empty([batch_size * self.beam_size], dtype=float_dtype, device=device)
            )
            decoder_output, state, *_ = self.decoder.predict(
                last_labels_wb.view(-1, 1), None, add_sos=False, batch_size=batch_size * self.beam_size
            )
            decoder_output = self.joint.project_prednet(decoder_output)
            self.decoder.batch_replace_states_all(state, dst_states=decoder_state)
        else:
            decoder_output = prev_batched_state.predictor_outputs
            decoder_state = prev_batched_state.predictor_states

        while active_mask.any():
            # step 1: joint output, fused with the fusion models
            logits = (
                self.joint.joint_after_projection(
                    encoder_output_projected[
                        batch_beam_indices.view(-1), safe_time_indices.view(-1)
                    ].unsqueeze(1),
                    decoder_output,
                )
                .squeeze(1)
                .squeeze(1)
            )
            log_probs = F.log_softmax(logits, dim=-1, dtype=float_dtype).view(batch_size, self.beam_size, -1)
            log_probs_top_k, labels_top_k = self.topk_fusion_model(fusion_scores_list, log_probs)

            # step 2: candidates; inactive hypotheses kept at the first position with their scores
            log_probs_blank = log_probs[..., self._blank_index]
            hyps_scores = batched_hyps.scores
            hyps_candidates_prob = hyps_scores.unsqueeze(-1) + log_probs_top_k
            hyps_candidates_prob_forced_blank = hyps_scores + log_probs_blank
            hyps_candidates_prob = torch.where(
                active_mask.unsqueeze(-1), hyps_candidates_prob, INACTIVE_SCORE
            )
            hyps_candidates_prob[..., 0] = torch.where(active_mask, hyps_candidates_prob[..., 0], hyps_scores)
            labels_top_k = torch.where(active_mask.unsqueeze(-1), labels_top_k, NON_EXISTENT_LABEL_VALUE)
            if self.max_symbols is not None:
                force_blank = (batched_hyps.last_timestamp_lasts >= self.max_symbols) & active_mask
            else:
                force_blank = torch.full_like(active_mask, fill_value=False)
            hyps_candidates_prob = torch.where(
                force_blank.unsqueeze(-1), INACTIVE_SCORE, hyps_candidates_prob
            )
            hyps_candidates_prob[..., 0] = torch.where(
                force_blank, hyps_candidates_prob_forced_blank, hyps_candidates_prob[..., 0]
            )
            labels_top_k = torch.where(force_blank.unsqueeze(-1), self._blank_index, labels_top_k)
            next_hyps_prob, hyps_candidates_indices = torch.topk(
                hyps_candidates_prob.view(batch_size, -1), k=self.beam_size, largest=True, sorted=True
            )
            hyps_indices = torch.gather(
                batch_beam_beam_indices.reshape(batch_size, -1), dim=-1, index=hyps_candidates_indices
            )
            next_labels = torch.gather(
                labels_top_k.reshape(batch_size, -1), dim=-1, index=hyps_candidates_indices
            )

            # steps 3-4: store, recombine identical hypotheses
            if self.max_symbols is None:
                batched_hyps.add_results_(hyps_indices, next_labels, next_hyps_prob)
            else:
                batched_hyps.add_results_no_checks_(hyps_indices, next_labels, next_hyps_prob)
            batched_hyps.recombine_hyps_()

            # step 5: prediction network and fusion states of the extended hypotheses
            last_labels_wb = torch.where(next_labels >= 0, next_labels, self._blank_index)
            preserve_state = last_labels_wb == self._blank_index
            prev_decoder_output = torch.gather(
                decoder_output.view(batch_size, self.beam_size, 1, -1),
                dim=1,
                index=hyps_indices[:, :, None, None].expand(
                    batch_size, self.beam_size, 1, decoder_output.shape[-1]
                ),
            ).view(batch_size * self.beam_size, 1, -1)
            prev_decoder_state = self.decoder.batch_aggregate_states_beam(
                decoder_state, batch_size, self.beam_size, hyps_indices
            )
            decoder_output, decoder_state, *_ = self.decoder.predict(
                last_labels_wb.view(-1).unsqueeze(1),
                prev_decoder_state,
                add_sos=False,
                batch_size=batch_size * self.beam_size,
            )
            decoder_output = self.joint.project_prednet(decoder_output)
            decoder_output = torch.where(
                preserve_state.view(-1)[:, None, None], prev_decoder_output, decoder_output
            )
            self.decoder.batch_replace_states_mask(
                src_states=prev_decoder_state, dst_states=decoder_state, mask=preserve_state.view(-1)
            )
            for fusion_model_idx, fusion_model in enumerate(self.fusion_models):
                candidates = fusion_states_candidates_list[fusion_model_idx]
                fusion_states_candidates = torch.gather(
                    candidates.view(batch_size, self.beam_size, -1),
                    dim=1,
                    index=hyps_indices[:, :, None].expand(batch_size, self.beam_size, candidates.shape[-1]),
                )
                fusion_states_prev = torch.gather(
                    fusion_states_list[fusion_model_idx].view(batch_size, self.beam_size),
                    dim=1,
                    index=hyps_indices,
                )
                last_labels_wb_blank_replaced = torch.where(preserve_state, 0, last_labels_wb)
                fusion_states = torch.gather(
                    fusion_states_candidates, dim=-1, index=last_labels_wb_blank_replaced.unsqueeze(-1)
                ).squeeze(-1)
                fusion_states = torch.where(preserve_state, fusion_states_prev, fusion_states).view(-1)
                fusion_scores, fusion_states_candidates = fusion_model.advance(states=fusion_states)
                fusion_scores_list[fusion_model_idx] = (
                    fusion_scores.to(dtype=float_dtype).view(batch_size, self.beam_size, -1)
                    * self.fusion_models_alpha[fusion_model_idx]
                )
                fusion_states_list[fusion_model_idx] = fusion_states
                fusion_states_candidates_list[fusion_model_idx] = fusion_states_candidates

            # step 6: time indices; an open row stops once a live hypothesis has passed its last frame
            time_indices = torch.gather(time_indices, dim=-1, index=hyps_indices) + (
                next_labels == self._blank_index
            )
            torch.minimum(time_indices, last_timesteps, out=safe_time_indices)
            passed = (time_indices > last_timesteps) & (batched_hyps.scores > INACTIVE_SCORE)
            stopped |= open_rows & passed.any(dim=-1, keepdim=True)
            active_mask = (time_indices <= last_timesteps) & ~stopped

        last_labels = batched_hyps.get_last_labels(pad_id=self._SOS)
        batched_hyps.next_timestamp.fill_(0)
        batched_hyps.timestamps += frame_offsets[:, None, None]
        decoding_state = BatchedBeamState(
            predictor_states=decoder_state,
            predictor_outputs=decoder_output,
            labels=(
                torch.where(last_labels == self._SOS, prev_batched_state.labels, last_labels)
                if prev_batched_state is not None
                else last_labels
            ),
            decoded_lengths=frame_offsets + encoder_output_length,
            fusion_states_list=fusion_states_list,
            time_jumps=None,
            **batched_hyps.export_cross_chunk_state(),
        )
        return batched_hyps, decoding_state, time_indices


class PerStreamTDTBeamComputer(_PerStreamFusion, ModifiedALSDBatchedTDTComputer):
    """NeMo 3.0.0 ``ModifiedALSDBatchedTDTComputer`` whose fusion scoring is per stream."""

    def topk_fusion_model(
        self,
        fusion_scores_list: list[torch.Tensor],
        log_probs: torch.Tensor,
        duration_log_probs: torch.Tensor,
        eps: float = _EPS,
    ) -> Any:
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
    evidence_margin: float | None = None,
) -> Any:
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
    computer.evidence_margin = evidence_margin
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
    lags: torch.Tensor | None = None  # [beam] (RNNT) frames before ``decoded_frames`` not consumed yet
    tail: torch.Tensor | None = None  # [<= RESUME_FRAMES, D] (RNNT) the last encoder frames, fed again


RESUME_FRAMES = 16  # encoder frames kept for hypotheses that stopped behind a chunk end (seen: <= 9)


class BeamSearch:
    """Merges per-stream beam states into one batched MALSD call and splits the result back.

    RNNT: a chunk call of a stream that goes on stops when its first hypothesis passes the chunk end
    (``PerStreamRNNTBeamComputer.decode_chunk``); the others resume from their own frames in the next call,
    which is fed the last ``RESUME_FRAMES`` frames again. TDT uses NeMo's call as it is."""

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
            lags=None if self.is_tdt else zeros.clone(),
        )

    def decode(
        self,
        states: list[BeamStreamState],
        encoder_output: torch.Tensor,
        encoder_lengths: torch.Tensor,
        model_ids: list[int],
        last: list[bool] | None = None,
    ) -> None:
        """Advance every stream's beams over its frames (``encoder_output`` [B, T, D]). ``last``: per stream,
        whether these are its last frames (every beam then decodes to the end). A stream enters with new
        frames, or (RNNT) at its end without any when ``has_pending`` (its beams behind finish)."""
        ends = last or [False] * len(states)
        for state, length, end in zip(states, encoder_lengths.tolist(), ends, strict=True):
            if length <= 0 and not (end and not self.is_tdt and state.tail is not None):
                raise ValueError("streams without new frames must not enter a beam call")
        device = encoder_output.device
        ids = torch.tensor(model_ids, dtype=torch.long, device=device)
        self.computer.biasing.row_model_ids = ids.repeat_interleave(self.beam_size)
        try:
            if self.is_tdt:
                hyps, batched = self.computer(encoder_output, encoder_lengths, self._merge(states))
                fed, next_frames = None, None
            else:
                fed = [
                    torch.cat([s.tail, encoder_output[b, :n]])
                    if s.tail is not None
                    else encoder_output[b, :n]
                    for b, (s, n) in enumerate(zip(states, encoder_lengths.tolist(), strict=True))
                ]
                hyps, batched, next_frames = self._decode_resuming(states, fed, ends)
        finally:
            self.computer.biasing.row_model_ids = None
        root_ptrs = hyps.flatten_()
        self._split(batched, states)
        if fed is not None and next_frames is not None:
            for state, frames, next_frame in zip(states, fed, next_frames, strict=True):
                state.lags = (frames.shape[0] - next_frame).clamp(
                    min=0
                )  # frames this beam has yet to consume
                state.tail = frames[-RESUME_FRAMES:].clone()
        self._extend_histories(hyps, root_ptrs, states)

    def _decode_resuming(
        self, states: list[BeamStreamState], fed: list[torch.Tensor], last: list[bool]
    ) -> tuple[Any, BatchedBeamState, torch.Tensor]:
        """The RNNT call over each stream's ``fed`` frames (its kept ones, then its new ones): each beam
        starts where it stopped; a stream not at its ``last`` frames stops with its first finished beam."""
        device = fed[0].device
        lengths = torch.tensor([f.shape[0] for f in fed], device=device)
        kept = torch.tensor([s.tail.shape[0] if s.tail is not None else 0 for s in states], device=device)
        start = (kept[:, None] - torch.stack([_lags(s) for s in states])).clamp(min=0)
        offsets = torch.tensor([s.decoded_frames for s in states], device=device) - kept
        open_rows = ~torch.tensor(last, dtype=torch.bool, device=device)
        frames = torch.nn.utils.rnn.pad_sequence(fed, batch_first=True)
        decoded: tuple[Any, BatchedBeamState, torch.Tensor] = self.computer.decode_chunk(
            frames, lengths, self._merge(states), start, open_rows, offsets
        )
        return decoded

    def has_pending(self, state: BeamStreamState) -> bool:
        """Whether some of an RNNT stream's beams stopped behind its last decoded frame (a cache-aware
        stream's end brings no new frames: its last call is over the kept ones alone). One host sync."""
        return state.tail is not None and state.lags is not None and bool(state.lags.max() > 0)

    def best_beam(self, state: BeamStreamState) -> int:
        """Index of the best beam by length-normalised score (NeMo's ``flatten_sort_`` criterion)."""
        normalized = state.scores / (state.current_lengths_nb.to(state.scores.dtype) + 1)
        return int(torch.argmax(normalized))

    def best_beams(
        self, states: list[BeamStreamState], model_ids: list[int] | None = None
    ) -> list[tuple[int, int]]:
        """Per stream, ``best_beam`` and that beam's lag (0 for TDT), read with one host-device sync. With
        ``model_ids`` (each stream's biasing model, -1: none), a beam in the middle of a term is ranked as if
        the utterance ended there: without the boost of the unfinished part (``end_scores``)."""
        scores = torch.stack([s.scores for s in states])
        if model_ids is not None:
            biasing = torch.stack([s.fusion_states[0] for s in states])
            ids = torch.tensor(model_ids, device=biasing.device).repeat_interleave(self.beam_size)
            refund = self.computer.biasing.multi_model.end_scores(biasing.view(-1), ids)
            scores = scores + refund.view(scores.shape).to(scores.dtype)
        lengths = torch.stack([s.current_lengths_nb for s in states]).to(scores.dtype)
        best = torch.argmax(scores / (lengths + 1), dim=-1)
        if self.is_tdt:
            lags = torch.zeros_like(best)
        else:
            lags = torch.stack([_lags(s) for s in states]).gather(1, best[:, None]).squeeze(1).to(best.dtype)
        return [(int(b), int(lag)) for b, lag in torch.stack([best, lags], dim=1).tolist()]

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
        if state.lags is not None:
            state.lags = state.lags[rows].clone()
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
        states: torch.Tensor = model.get_init_states(batch_size=self.beam_size, bos=True)
        return states.to(device)

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
            time_jumps=torch.stack([_time_jumps(s) for s in states]) if self.is_tdt else None,
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
        decoded_lengths = batched.decoded_lengths.tolist()  # one host-device sync, not one per stream
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
            state.decoded_frames = int(decoded_lengths[b])

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


def _lags(state: BeamStreamState) -> torch.Tensor:
    """An RNNT state's per-beam lags (always set for RNNT)."""
    if state.lags is None:
        raise RuntimeError("an RNNT beam state has no lags")
    return state.lags


def _time_jumps(state: BeamStreamState) -> torch.Tensor:
    """A TDT state's per-beam time jumps (always set for TDT)."""
    if state.time_jumps is None:
        raise RuntimeError("a TDT beam state has no time jumps")
    return state.time_jumps
