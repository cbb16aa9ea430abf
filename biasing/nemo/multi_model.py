"""A faster pure-PyTorch ``advance`` for NeMo 3.0.0's ``GPUBiasingMultiModel`` (CPU, or GPU without Triton).

Adapts ``nemo.collections.asr.parts.context_biasing.biasing_multi_model.GPUBiasingMultiModel`` (NeMo 3.0.0).
NeMo's ``_advance_pytorch`` does work of size batch x vocabulary on every back-off hop. Here the root's arcs
(exactly one per label, in label order: checked when a model is added) give the dense base row with one
gather, and only the few arcs of the non-root states on each row's back-off chain are scattered over it,
deepest state last, which is NeMo's rule (the first state on the chain with an arc for the label wins, plus
the back-off weights accumulated before it). Storage, ids, ``add_model`` and ``remove_model`` are NeMo's own.

It also applies our graphs' word-end rule (``biasing.graph``, issue 35), which NeMo's kernels do not know: a
per-state ``word_end_refund`` (kept in a buffer beside NeMo's state arrays, cut and shifted with them) is paid
by labels that continue a word (``label_continues_word``) when they back off from that state. Models
without the rule (NeMo's own trees) get zeros, and then the scores equal NeMo's (tested). ``advance`` always
takes this path (NeMo's Triton kernel would skip the rule).
"""

from __future__ import annotations

from typing import Any

import torch
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel

_Hop = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # rows, state, backoff, refunds so far


class SparseAdvanceMultiModel(GPUBiasingMultiModel):
    """``GPUBiasingMultiModel`` whose PyTorch advance costs one batch x vocabulary gather per call, with the
    word-end refund of our graphs.

    ``all_word_end_refunds`` [states reserved] lines up with NeMo's state arrays (``model2states_offset``);
    ``label_continues_word`` [V] (0/1 float) is the tokenizer's, set by the first model that carries it."""

    def __init__(self, vocab_size: int, use_triton: bool | None = False) -> None:
        super().__init__(vocab_size=vocab_size, use_triton=use_triton)
        self.all_word_end_refunds = torch.nn.Buffer(torch.zeros([self.num_states_reserved]))
        self.label_continues_word = torch.nn.Buffer(torch.zeros([vocab_size]))

    @torch.no_grad()
    def add_model(self, model: NGramGPULanguageModel, alpha: float = 1.0) -> int:
        """NeMo's ``add_model``, refusing models whose root does not hold one arc per label in label order;
        the model's ``word_end_refund`` / ``label_continues_word`` buffers (``biasing.nemo.compat``) join
        ours (zeros when it has none)."""
        start, end = (int(v) for v in model.start_end_arcs[model.START_STATE])
        labels = model.ilabels[start:end]
        if end - start != self.vocab_size or not torch.equal(labels.cpu(), torch.arange(self.vocab_size)):
            raise ValueError("the model's root state must have exactly one arc per label, in label order")
        continues = getattr(model, "label_continues_word", None)
        if continues is not None and bool(self.label_continues_word.any()):
            if not torch.equal(continues.to(self.label_continues_word), self.label_continues_word):
                raise ValueError("the model was compiled for another tokenizer's word boundaries")
        first_state = self.num_states_total
        model_id = int(super().add_model(model, alpha))
        if self.all_word_end_refunds.shape[0] < self.num_states_reserved:  # NeMo grew its state arrays
            grown = torch.zeros(self.num_states_reserved, device=self.all_word_end_refunds.device)
            grown[: self.all_word_end_refunds.shape[0]] = self.all_word_end_refunds
            self.all_word_end_refunds = torch.nn.Buffer(grown)
        refunds = getattr(model, "word_end_refund", None)
        span = slice(first_state, first_state + model.num_states)
        if refunds is None:
            self.all_word_end_refunds[span] = 0.0
        else:
            self.all_word_end_refunds[span] = refunds[: model.num_states].to(self.all_word_end_refunds)
        if continues is not None:
            self.label_continues_word.copy_(continues.to(self.label_continues_word))
        return model_id

    @torch.no_grad()
    def remove_model(self, model_id: int) -> None:
        """NeMo's ``remove_model``, cutting the model's refunds out of ours the same way."""
        if model_id not in self.free_ids and model_id < self.num_models:
            start = int(self.model2states_offset[model_id])
            end = start + int(self.model2num_states[model_id])
            self._clear_buffer_or_param_range(self.all_word_end_refunds, start, end, self.num_states_total)
        super().remove_model(model_id)

    def advance(
        self, states: torch.Tensor, model_ids: torch.Tensor, eos_id: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """NeMo's ``advance`` through ``_advance_pytorch`` always (the word-end rule), times each alpha."""
        if eos_id is not None:
            raise NotImplementedError("end-of-sequence scores are not used by transducer decoding")
        scores, next_states = self._advance_pytorch(states, model_ids)
        scores *= self.model2alpha[model_ids][:, None]
        return scores, next_states

    @torch.no_grad()
    def end_scores(self, states: torch.Tensor, model_ids: torch.Tensor) -> torch.Tensor:
        """What ending the utterance in each state scores [B]: the back-off weights from the state down to
        the root, times the model's alpha (0 for id -1): minus the unfinished part of a partial match, 0
        after a completed phrase. NeMo's transducer decoding never refunds a partial match at the end, so a
        hypothesis in the middle of a term would outrank complete ones when an utterance is committed."""
        active = model_ids >= 0
        ids = torch.where(active, model_ids, 0)
        accumulated = self._backoff_chain(states, model_ids)[1]
        return torch.where(active, accumulated * self.model2alpha[ids], torch.zeros_like(accumulated))

    def _backoff_chain(
        self, states: torch.Tensor, model_ids: torch.Tensor
    ) -> tuple[list[_Hop], torch.Tensor, torch.Tensor]:
        """Each row's walk from its state down to the root (rows with id -1 stay at the root): the hops as
        (rows, global state, back-off weights so far, word-end refunds so far), and both totals [B]."""
        active = model_ids >= 0
        states_offset = self.model2states_offset[torch.where(active, model_ids, 0)]
        current = torch.where(active, states, 0)
        accumulated = torch.zeros(states.shape[0], dtype=self.all_backoff_weights.dtype, device=states.device)
        refunded = torch.zeros_like(accumulated)
        hops: list[_Hop] = []
        pending = (current != self.START_STATE).nonzero().squeeze(1)
        while pending.numel() > 0:
            global_states = current[pending] + states_offset[pending]
            hops.append((pending, global_states, accumulated[pending].clone(), refunded[pending].clone()))
            accumulated[pending] += self.all_backoff_weights[global_states]
            refunded[pending] += self.all_word_end_refunds[global_states]
            current[pending] = self.all_backoff_to_states[global_states]
            pending = pending[current[pending] != self.START_STATE]
        return hops, accumulated, refunded

    def _advance_pytorch(
        self, states: torch.Tensor, model_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        vocab_size = self.vocab_size
        active = model_ids >= 0
        ids = torch.where(active, model_ids, 0)
        states_offset = self.model2states_offset[ids]
        arcs_offset = self.model2arcs_offset[ids]
        hops, accumulated, refunded = self._backoff_chain(states, model_ids)
        continues = self.label_continues_word.to(accumulated.dtype)
        root_first_arc = self.all_start_end_arcs[states_offset, 0] + arcs_offset
        base = root_first_arc[:, None] + torch.arange(vocab_size, device=states.device)[None, :]
        scores = self.all_arcs_weights[base] + accumulated[:, None] - refunded[:, None] * continues[None, :]
        next_states = self.all_to_states[base].to(states.dtype)
        for rows, global_states, backoff, refund in reversed(hops):
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
            paid = refund[which] * continues[labels]
            scores[target_rows, labels] = self.all_arcs_weights[arcs] + backoff[which] - paid
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
