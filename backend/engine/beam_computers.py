"""The batched MALSD computers of the beam search: NeMo 3.0.0's, with per-stream fusion scoring and
resumable RNNT chunk calls.

Adapted from NeMo 3.0.0 (``nemo_toolkit[asr]==3.0.0``):
``nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer.ModifiedALSDBatchedRNNTComputer`` and
``nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer.ModifiedALSDBatchedTDTComputer``. Both
score fusion per stream (``backend.engine.beam_fusion.PerStreamFusion``); the RNNT one's chunk calls stop
where one long call would be (``PerStreamRNNTBeamComputer.decode_chunk``). ``build_beam_computer`` makes
the one that fits the model, with the biasing (and the n-gram LM, if any) as its fusion models.
``backend.engine.beam.BeamSearch`` drives them across chunks and streams.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.submodules.rnnt_malsd_batched_computer import ModifiedALSDBatchedRNNTComputer
from nemo.collections.asr.parts.submodules.tdt_malsd_batched_computer import ModifiedALSDBatchedTDTComputer
from nemo.collections.asr.parts.submodules.transducer_decoding.label_looping_base import BatchedBeamState
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import (
    INACTIVE_SCORE,
    NON_EXISTENT_LABEL_VALUE,
    BatchedBeamHyps,
    BlankLMScoreMode,
    PruningMode,
    seed_batched_hyps_from_state,
)

from backend.engine.beam_fusion import PerStreamFusion, RowRoutedBiasing

_EPS = 1e-2  # NeMo's clamp for log(1 - p(blank)) (bf16-safe)


class PerStreamRNNTBeamComputer(PerStreamFusion, ModifiedALSDBatchedRNNTComputer):
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


class PerStreamTDTBeamComputer(PerStreamFusion, ModifiedALSDBatchedTDTComputer):
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
