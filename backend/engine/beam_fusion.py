"""Per-stream biasing fusion for the beam search: which biasing model scores each row, and how the fusion
scores enter the joint's log-probabilities.

``RowRoutedBiasing`` makes NeMo 3.0.0's ``GPUBiasingMultiModel``
(``nemo.collections.asr.parts.context_biasing.biasing_multi_model``) look like one fusion model of the MALSD
computers; ``PerStreamFusion`` is the ``topk_fusion_model`` scoring that ``backend.engine.beam_computers``
mixes into NeMo's RNNT and TDT computers (each row's own alpha, the evidence gate, the LM token bonus).
"""

from __future__ import annotations

import torch
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import BlankLMScoreMode


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


class PerStreamFusion:
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
