"""A faster pure-PyTorch ``advance`` for NeMo 3.0.0's ``GPUBiasingMultiModel`` (CPU, or GPU without Triton).

Adapts ``nemo.collections.asr.parts.context_biasing.biasing_multi_model.GPUBiasingMultiModel`` (NeMo 3.0.0).
NeMo's ``_advance_pytorch`` does work of size batch x vocabulary on every back-off hop. Here the root's arcs
(exactly one per label, in label order: checked when a model is added) give the dense base row with one
gather, and only the few arcs of the non-root states on each row's back-off chain are scattered over it,
deepest state last, which is NeMo's rule (the first state on the chain with an arc for the label wins, plus
the back-off weights accumulated before it). Results equal NeMo's (tested); storage, ids, ``add_model`` and
``remove_model`` are NeMo's own.
"""

from __future__ import annotations

from typing import Any

import torch
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel


class SparseAdvanceMultiModel(GPUBiasingMultiModel):
    """``GPUBiasingMultiModel`` whose PyTorch advance costs one batch x vocabulary gather per call."""

    @torch.no_grad()
    def add_model(self, model: NGramGPULanguageModel, alpha: float = 1.0) -> int:
        """NeMo's ``add_model``, refusing models whose root does not hold one arc per label in label order."""
        start, end = (int(v) for v in model.start_end_arcs[model.START_STATE])
        labels = model.ilabels[start:end]
        if end - start != self.vocab_size or not torch.equal(labels.cpu(), torch.arange(self.vocab_size)):
            raise ValueError("the model's root state must have exactly one arc per label, in label order")
        return int(super().add_model(model, alpha))

    def _advance_pytorch(
        self, states: torch.Tensor, model_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        vocab_size = self.vocab_size
        active = model_ids >= 0
        ids = torch.where(active, model_ids, 0)
        states_offset = self.model2states_offset[ids]
        arcs_offset = self.model2arcs_offset[ids]
        current = torch.where(active, states, 0)
        accumulated = torch.zeros(states.shape[0], dtype=self.all_backoff_weights.dtype, device=states.device)
        hops: list[
            tuple[torch.Tensor, torch.Tensor, torch.Tensor]
        ] = []  # (rows, global state, backoff so far)
        pending = (current != self.START_STATE).nonzero().squeeze(1)
        while pending.numel() > 0:
            global_states = current[pending] + states_offset[pending]
            hops.append((pending, global_states, accumulated[pending].clone()))
            accumulated[pending] += self.all_backoff_weights[global_states]
            current[pending] = self.all_backoff_to_states[global_states]
            pending = pending[current[pending] != self.START_STATE]
        root_first_arc = self.all_start_end_arcs[states_offset, 0] + arcs_offset
        base = root_first_arc[:, None] + torch.arange(vocab_size, device=states.device)[None, :]
        scores = self.all_arcs_weights[base] + accumulated[:, None]
        next_states = self.all_to_states[base].to(states.dtype)
        for rows, global_states, backoff in reversed(hops):
            first = self.all_start_end_arcs[global_states, 0] + arcs_offset[rows]
            counts = self.all_start_end_arcs[global_states, 1] - self.all_start_end_arcs[global_states, 0]
            if int(counts.sum()) == 0:
                continue
            which = torch.repeat_interleave(torch.arange(rows.numel(), device=rows.device), counts)
            steps = (
                torch.arange(which.numel(), device=rows.device) - (torch.cumsum(counts, 0) - counts)[which]
            )
            arcs = first[which] + steps
            target_rows, labels = rows[which], self.all_ilabels[arcs]
            scores[target_rows, labels] = self.all_arcs_weights[arcs] + backoff[which]
            next_states[target_rows, labels] = self.all_to_states[arcs].to(states.dtype)
        scores = torch.where(active[:, None], scores, torch.zeros((), dtype=scores.dtype))
        next_states = torch.where(active[:, None], next_states, torch.full((), -1, dtype=next_states.dtype))
        return scores, next_states


def install_sparse_advance(computer: Any) -> SparseAdvanceMultiModel:
    """Give a NeMo 3.0.0 label-looping computer (``GreedyBatched{RNNT,TDT}LabelLoopingComputer`` built with
    ``enable_per_stream_biasing=True``) a ``SparseAdvanceMultiModel`` in place of its empty multi-model.
    Call before any model is registered; the computer reads the attribute at every step."""
    current = getattr(computer, "biasing_multi_model", None)
    if not isinstance(current, GPUBiasingMultiModel):
        raise ValueError(
            "the computer has no per-stream biasing multi-model (enable_per_stream_biasing=False?)"
        )
    if current.has_models():
        raise ValueError("replace the multi-model before registering any model")
    replacement = SparseAdvanceMultiModel(vocab_size=current.vocab_size, use_triton=current.use_triton)
    replacement.reallocation_callbacks = list(current.reallocation_callbacks)
    replacement.to(current.all_arcs_weights.device)
    computer.biasing_multi_model = replacement
    return replacement
