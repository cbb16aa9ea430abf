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

This module keeps each stream's beams between chunks (``BeamStreamState``, ``BeamSearch``);
``backend.engine.beam_computers`` holds the NeMo computers, ``backend.engine.beam_fusion`` the per-stream
fusion. Only ``pruning_mode=late`` is supported (NeMo's decoding-config default). Everything runs on the
decode thread under ``torch.inference_mode()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from nemo.collections.asr.parts.submodules.transducer_decoding.label_looping_base import BatchedBeamState
from nemo.collections.asr.parts.utils.batched_beam_decoding_utils import INACTIVE_SCORE, INIT_HASH_VALUE

from backend.engine.beam_computers import PerStreamTDTBeamComputer, build_beam_computer, tdt_durations

__all__ = [
    "RESUME_FRAMES",
    "BeamSearch",
    "BeamStreamState",
    "Token",
    "build_beam_computer",
    "tdt_durations",
]


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
