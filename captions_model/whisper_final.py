"""Whisper tiny.en (encoder + decoder) in plain PyTorch: the second pass that re-decodes finals.

The first pass (NeMo RNNT on a frozen Whisper encoder) streams partials; when a segment is final, this module
decodes it again with Whisper's own pretrained decoder, which is more accurate on complete utterances. The
weights come from the CTranslate2 release of tiny.en (``scripts/export_final_pass.py`` converts them into
``models/captions-final-pass.pt``: int8 per output channel for matrices, float16 for the rest, plus the
tokenizer and the mel filter bank, so runtime needs neither CTranslate2 nor librosa).

Differences from stock Whisper, on purpose:

* The encoder runs on the unpadded utterance (plus ``pad_s`` seconds of appended silence, without which the
  decoder tends to loop) instead of a fixed 30 s window: short finals cost proportionally less.
* Utterances are batched with padding masks, and the beam search runs over all of them at once (one
  decoder batch of ``utterances x beam``) with a self-attention KV cache and cross-attention keys/values
  computed once per utterance.
* A ``Booster`` (shallow fusion with a per-utterance phrase graph) can add a score to text tokens.

Decoding follows Whisper/CTranslate2 for tiny.en: prompt ``<|startoftranscript|><|notimestamps|>``
(``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` for a multilingual model such as base, told
apart by its 51865-id vocabulary), special tokens except end-of-text suppressed, the non-speech symbol ids
of the release's ``suppress_ids`` suppressed, blank and end-of-text suppressed at the first step,
``no_speech_prob`` read at the start-of-transcript position.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import Tensor, nn

from captions_model.paths import FINAL_PASS_MODEL_PATH
from captions_model.whisper_core import WhisperBlock, dequantize_int8, quantize_int8, sinusoids

__all__ = [
    "DEFAULT_PATH",
    "Booster",
    "FinalPassModel",
    "Hypothesis",
    "SpecialTokens",
    "WhisperDecoder",
    "WhisperEncoder",
    "WhisperModel",
    "log_mel",
    "pack_state",
    "unpack_state",
]

DEFAULT_PATH = FINAL_PASS_MODEL_PATH
SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
MAX_SECONDS = 30.0
_SCALE = ".int8_scale"


def log_mel(samples: np.ndarray, filters: Tensor) -> Tensor:
    """Whisper's log-mel features of 16 kHz mono float audio: [n_mels, len(samples) // 160].

    Centered STFT (reflect padding, Hann window of 400, hop 160), power spectrum, mel filter bank
    ``filters`` [n_mels, 201], log10 clamped at 1e-10, floored at the utterance's max - 8, then
    ``(x + 4) / 4``; the last STFT frame is dropped as Whisper does.
    """
    audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
    if audio.numel() < N_FFT // 2 + 1:  # reflect padding needs a few samples
        audio = F.pad(audio, (0, N_FFT // 2 + 1 - audio.numel()))
    stft = torch.stft(audio, N_FFT, HOP, window=torch.hann_window(N_FFT), return_complex=True)
    power = stft[..., :-1].abs() ** 2
    mel = filters @ power
    x = torch.clamp(mel, min=1e-10).log10()
    x = torch.maximum(x, x.max() - 8.0)
    return (x + 4.0) / 4.0


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder on unpadded, batched log-mel: convolutions, sinusoids, pre-norm blocks."""

    def __init__(self, n_mels: int, d_model: int, n_layers: int, n_heads: int, max_frames: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.blocks = nn.ModuleList([WhisperBlock(d_model, n_heads) for _ in range(n_layers)])
        self.ln_post = nn.LayerNorm(d_model)
        self.max_frames = max_frames
        self.positions: Tensor
        self.register_buffer("positions", sinusoids(max_frames, d_model), persistent=False)

    def forward(self, mel: Tensor, mel_len: Tensor) -> tuple[Tensor, Tensor]:
        """mel [B, n_mels, T] (zero past each length), mel_len [B] -> ([B, ceil(T/2), D], lengths [B]).

        Padding is zeroed after the first convolution so that each utterance's output equals what it gives
        alone; frames past an utterance's length are masked out of attention (their values are garbage).
        """
        valid = torch.arange(mel.shape[-1])[None, None, :] < mel_len[:, None, None]
        x = F.gelu(self.conv1(mel.masked_fill(~valid, 0.0))) * valid
        x = F.gelu(self.conv2(x)).transpose(1, 2)
        t = x.shape[1]
        if t > self.max_frames:
            raise ValueError(f"{t} encoder frames exceed the maximum of {self.max_frames}")
        x = x + self.positions[:t]
        enc_len = torch.div(mel_len + 1, 2, rounding_mode="floor")
        mask = None
        if bool((enc_len < t).any()):
            mask = (torch.arange(t)[None, :] < enc_len[:, None])[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_post(x), enc_len


def _linear(layer: nn.Module, x: Tensor, groups: int) -> Tensor:
    """``layer(x)``, applied to each of ``groups`` equal slices of dim 0 separately when ``layer`` is a
    dynamically quantized int8 linear: its activation scale is computed per call over the whole input, so
    slicing by utterance keeps one utterance's result independent of the others in the batch."""
    if groups <= 1 or type(layer) is nn.Linear:
        return layer(x)
    return torch.cat([layer(part) for part in x.split(x.shape[0] // groups)])


class DecoderBlock(nn.Module):
    """One pre-norm decoder block: causal self-attention (fused QKV), cross-attention, GELU MLP."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.attn_ln = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.cross_ln = nn.LayerNorm(d_model)
        self.cross_q = nn.Linear(d_model, d_model)
        self.cross_kv = nn.Linear(d_model, 2 * d_model)
        self.cross_out = nn.Linear(d_model, d_model)
        self.mlp_ln = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def cross_keys_values(self, enc: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder output [G, T, D] -> cross-attention keys and values, each [G, H, T, D/H]."""
        g, t, d = enc.shape
        k, v = _linear(self.cross_kv, enc, g).view(g, t, 2, self.n_heads, d // self.n_heads).unbind(2)
        return k.transpose(1, 2), v.transpose(1, 2)

    def forward(
        self,
        x: Tensor,
        cache: tuple[Tensor, Tensor] | None,
        self_mask: Tensor | None,
        cross: tuple[Tensor, Tensor],
        cross_mask: Tensor | None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x [N, L, D] (N = G groups x r rows, grouped by utterance); cache: previous keys/values
        [N, H, S, D/H]; cross: [G, H, T, D/H] shared by the r rows of each group. Returns (x, new cache)."""
        n, L, d = x.shape
        h, dh = self.n_heads, d // self.n_heads
        ck, cv = cross
        g = ck.shape[0]
        r = n // g
        q, k, v = _linear(self.qkv, self.attn_ln(x), g).view(n, L, 3, h, dh).permute(2, 0, 3, 1, 4).unbind(0)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self_mask)
        x = x + _linear(self.out, y.transpose(1, 2).reshape(n, L, d), g)
        # Cross-attention: the r rows of a group become r*L query positions against the group's keys.
        q = _linear(self.cross_q, self.cross_ln(x), g).view(g, r * L, h, dh).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, ck, cv, attn_mask=cross_mask)
        x = x + _linear(self.cross_out, y.transpose(1, 2).reshape(n, L, d), g)
        x = x + _linear(self.fc2, F.gelu(_linear(self.fc1, self.mlp_ln(x), g)), g)
        return x, (k, v)


class WhisperDecoder(nn.Module):
    """Whisper's text decoder: token embedding (tied to the output projection), learned positions, blocks."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, n_ctx: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Parameter(torch.zeros(n_ctx, d_model))
        self.blocks = nn.ModuleList([DecoderBlock(d_model, n_heads) for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model)
        # A Linear sharing the embedding's weight, so that dynamic int8 quantization covers the projection.
        self.proj = nn.Linear(d_model, vocab_size, bias=False)
        self.proj.weight = self.embedding.weight

    def cross_keys_values(self, enc: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Cross-attention keys/values of every block, computed once per utterance."""
        return [cast(DecoderBlock, block).cross_keys_values(enc) for block in self.blocks]

    def forward(
        self,
        tokens: Tensor,
        offset: int,
        cache: list[tuple[Tensor, Tensor]] | None,
        cross: list[tuple[Tensor, Tensor]],
        cross_mask: Tensor | None,
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """tokens [N, L] at positions offset..offset+L-1 -> (logits [N, L, V] float32, new cache)."""
        L = tokens.shape[1]
        x = self.embedding(tokens) + self.positions[offset : offset + L]
        self_mask = None
        if L > 1:
            self_mask = torch.arange(offset + L)[None, :] <= (offset + torch.arange(L))[:, None]
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i], self_mask, cross[i], cross_mask)
            new_cache.append(kv)
        return _linear(self.proj, self.ln(x), cross[0][0].shape[0]).float(), new_cache


class WhisperModel(nn.Module):
    """Encoder and decoder of one Whisper size; ``config`` holds the dimensions."""

    def __init__(self, config: dict[str, int]) -> None:
        super().__init__()
        self.config = dict(config)
        self.encoder = WhisperEncoder(
            config["n_mels"], config["d_model"], config["encoder_layers"], config["n_heads"],
            config["max_source_positions"],
        )  # fmt: skip
        self.decoder = WhisperDecoder(
            config["vocab_size"], config["d_model"], config["decoder_layers"], config["n_heads"],
            config["max_target_positions"],
        )  # fmt: skip


def pack_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Compact a float state dict for shipping: int8 per output channel (row) for every tensor with >= 2
    dims (scale under ``<key>.int8_scale``), float16 for the rest."""
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        if value.dim() >= 2:
            out[key], out[key + _SCALE] = quantize_int8(value)
        else:
            out[key] = value.detach().half()
    return out


def unpack_state(packed: dict[str, Tensor]) -> dict[str, Tensor]:
    """Inverse of :func:`pack_state`: float32 tensors."""
    out: dict[str, Tensor] = {}
    for key, value in packed.items():
        if key.endswith(_SCALE):
            continue
        scale = packed.get(key + _SCALE)
        out[key] = dequantize_int8(value, scale) if scale is not None else value.float()
    return out


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the special tokens the decoding uses."""

    sot: int
    eot: int
    no_timestamps: int
    no_speech: int
    blank: int


@dataclass
class Hypothesis:
    """One decoded utterance: text tokens (no prompt, no end-of-text), the stripped text, the model's own
    sum/average log-probability (including end-of-text when emitted), the no-speech probability, and the
    total booster score that was added to the ranking score (``sum_logprob + boost``)."""

    tokens: list[int]
    text: str
    sum_logprob: float
    avg_logprob: float
    no_speech_prob: float
    boost: float


class Booster(Protocol):
    """Shallow-fusion scorer over a per-utterance phrase graph, consulted during the beam search.

    A hypothesis carries an integer state, starting at ``initial_state()``. ``scores(state)`` gives, for
    every token id, the boost to add to its log-probability and the state after it (dense, length
    ``vocab_size``); only text tokens are boosted. ``final_score(state)`` is added when the hypothesis emits
    end-of-text (e.g. to take back the boost of an unfinished phrase).
    """

    def initial_state(self) -> int: ...

    def scores(self, state: int) -> tuple[np.ndarray, np.ndarray]: ...

    def final_score(self, state: int) -> float: ...


@dataclass
class _Beam:
    """A live hypothesis of the search."""

    tokens: list[int]
    logprob: float
    boost: float
    state: int
    ended: bool = False
    # (logprob, boost, state) after each prefix of ``tokens`` (entry j: after j tokens), to cut loops.
    history: list[tuple[float, float, int]] = field(default_factory=list)

    def extended(self, token: int, logprob: float, boost: float, state: int) -> _Beam:
        """This hypothesis followed by ``token``."""
        history = self.history or [(self.logprob, self.boost, self.state)]
        return _Beam(self.tokens + [token], logprob, boost, state, False, history + [(logprob, boost, state)])

    def truncated(self, n: int) -> _Beam:
        """The hypothesis cut to its first ``n`` tokens (scores and state as they were then)."""
        logprob, boost, state = self.history[n]
        return _Beam(self.tokens[:n], logprob, boost, state, False, self.history[: n + 1])

    @property
    def total(self) -> float:
        return self.logprob + self.boost


def _repeated_block(tokens: list[int], min_len: int) -> int:
    """Length of a block of >= ``min_len`` tokens that ``tokens`` ends with twice in a row, else 0."""
    n = len(tokens)
    for size in range(min_len, n // 2 + 1):
        if tokens[n - size :] == tokens[n - 2 * size : n - size]:
            return size
    return 0


_M = TypeVar("_M", bound=nn.Module)


def _dynamic_int8(module: _M) -> _M:
    """``module`` with every ``nn.Linear`` replaced by a dynamically quantized int8 one (PyTorch eager); the
    module's own class and methods are kept (only submodules are swapped)."""
    with warnings.catch_warnings():  # eager-mode quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return cast(_M, torch.ao.quantization.quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8))


class FinalPassModel:
    """Whisper tiny.en for the final pass: features, batched encoder, batched beam search, rescoring.

    Build with :meth:`load`. Computation is float32 (weights dequantized from the shipped int8) unless asked:
    ``int8_decoder`` applies PyTorch dynamic int8 quantization to the decoder's ``nn.Linear`` layers (the
    tied 51864-way output projection included): ~5x faster decoding on one CPU thread, the same WER on 20
    synthesized sentences, but greedy tokens differ from float32 on about a quarter of them (capitalization,
    punctuation, once a word), so it is off by default. ``int8_encoder`` does the same for the encoder: ~2x
    faster, but its output drifts (cosine to float down to ~0.4 on some frames). Activation scales of dynamic
    int8 are per call, so the decoder's linear layers then run once per utterance of a batch (``_linear``),
    which keeps an utterance's tokens independent of the rest of the batch.
    """

    def __init__(
        self,
        model: WhisperModel,
        tokenizer: Tokenizer,
        mel_filters: Tensor,
        suppress_ids: list[int],
        *,
        int8_decoder: bool = False,
        int8_encoder: bool = False,
    ) -> None:
        model.eval()
        if int8_decoder:
            model.decoder = _dynamic_int8(model.decoder)
        if int8_encoder:
            model.encoder = _dynamic_int8(model.encoder)
        self.model = model
        self.config = model.config
        self.tokenizer = tokenizer
        self.mel_filters = mel_filters.float()
        self.vocab_size = int(model.config["vocab_size"])

        def tid(name: str) -> int:
            i = tokenizer.token_to_id(name)
            if i is None:
                raise ValueError(f"tokenizer has no {name}")
            return int(i)

        no_speech = tokenizer.token_to_id("<|nospeech|>")
        self.special = SpecialTokens(
            sot=tid("<|startoftranscript|>"),
            eot=tid("<|endoftext|>"),
            no_timestamps=tid("<|notimestamps|>"),
            no_speech=int(no_speech if no_speech is not None else tid("<|nocaptions|>")),
            blank=int(tokenizer.encode(" ", add_special_tokens=False).ids[0]),
        )
        self.text_token_limit = self.special.eot  # the first special id
        # Whisper's rule: a vocabulary of >= 51865 ids is a multilingual model, whose prompt also names the
        # language and the task (English transcription here); English-only models (51864) have neither.
        self.multilingual = self.vocab_size >= 51865
        if self.multilingual:
            self.prompt = [self.special.sot, tid("<|en|>"), tid("<|transcribe|>"), self.special.no_timestamps]
        else:
            self.prompt = [self.special.sot, self.special.no_timestamps]
        suppress = torch.zeros(self.vocab_size, dtype=torch.bool)
        suppress[self.text_token_limit :] = True
        suppress[self.special.eot] = False
        suppress[[i for i in suppress_ids if 0 <= i < self.vocab_size]] = True
        self._suppress = suppress
        first = suppress.clone()
        first[[self.special.blank, self.special.eot]] = True
        self._suppress_first = first
        self._text_mask = torch.arange(self.vocab_size) < self.text_token_limit

    @classmethod
    def load(
        cls, path: str | Path = DEFAULT_PATH, *, int8_decoder: bool = False, int8_encoder: bool = False
    ) -> FinalPassModel:
        """Load the shipped file written by ``scripts/export_final_pass.py`` (dequantized to float32), then
        optionally apply dynamic int8 to the decoder's / encoder's linear layers (see the class doc)."""
        blob: dict[str, Any] = torch.load(Path(path), map_location="cpu", weights_only=True)
        model = WhisperModel(blob["config"])
        state = unpack_state(blob["state"])
        state["decoder.proj.weight"] = state["decoder.embedding.weight"]  # tied, stored once
        model.load_state_dict(state, strict=True)
        return cls(
            model,
            Tokenizer.from_str(blob["tokenizer_json"]),
            blob["mel_filters"],
            list(blob["suppress_ids"]),
            int8_decoder=int8_decoder,
            int8_encoder=int8_encoder,
        )

    # ------------------------------------------------------------------ encoder

    def features(self, samples: np.ndarray) -> Tensor:
        """Whisper log-mel [80, frames] of one 16 kHz utterance (no padding added)."""
        return log_mel(samples, self.mel_filters)

    @torch.inference_mode()
    def encode(self, batch: list[np.ndarray], pad_s: float = 2.0) -> tuple[Tensor, Tensor]:
        """Encode utterances (16 kHz float32 mono), each followed by ``pad_s`` s of silence.

        Returns (encoder output [B, T, d_model], zero past each utterance's valid frames; lengths [B]).
        Raises ValueError when an utterance plus padding exceeds 30 s (Whisper's window).
        """
        if not batch:
            raise ValueError("empty batch")
        pad = np.zeros(int(round(pad_s * SAMPLE_RATE)), dtype=np.float32)
        feats = []
        for samples in batch:
            audio = np.concatenate([np.asarray(samples, dtype=np.float32).reshape(-1), pad])
            if audio.size > MAX_SECONDS * SAMPLE_RATE:
                raise ValueError(
                    f"utterance of {audio.size / SAMPLE_RATE:.2f} s including {pad_s} s padding exceeds "
                    f"{MAX_SECONDS:.0f} s"
                )
            feats.append(self.features(audio))
        lengths = torch.tensor([f.shape[1] for f in feats])
        mel = torch.zeros(len(feats), feats[0].shape[0], int(lengths.max()))
        for i, f in enumerate(feats):
            mel[i, :, : f.shape[1]] = f
        encoded, enc_len = self.model.encoder(mel, lengths)
        valid = torch.arange(encoded.shape[1])[None, :] < enc_len[:, None]
        return encoded.masked_fill(~valid[..., None], 0.0), enc_len

    # ------------------------------------------------------------------ decoder helpers

    def _cross(self, encoded: Tensor, lengths: Tensor) -> tuple[list[tuple[Tensor, Tensor]], Tensor | None]:
        """Cross keys/values of every block and the key mask [G, 1, 1, T] (None when nothing is padded)."""
        cross = self.model.decoder.cross_keys_values(encoded)
        t = encoded.shape[1]
        mask = None
        if bool((lengths < t).any()):
            mask = (torch.arange(t)[None, :] < lengths[:, None])[:, None, None, :]
        return cross, mask

    def _logprobs(self, logits: Tensor, first: bool) -> Tensor:
        """Suppress tokens on logits [..., V], then log-softmax (the order Whisper uses)."""
        suppress = self._suppress_first if first else self._suppress
        return torch.log_softmax(logits.masked_fill(suppress, float("-inf")), dim=-1)

    def text(self, tokens: list[int]) -> str:
        """Decoded text of text tokens, stripped."""
        return str(self.tokenizer.decode([t for t in tokens if t < self.text_token_limit])).strip()

    # ------------------------------------------------------------------ beam search

    @torch.inference_mode()
    def decode(
        self,
        encoded: Tensor,
        lengths: Tensor,
        *,
        beam_size: int = 4,
        max_tokens: list[int],
        boosters: list[Booster | None] | None = None,
        length_penalty: float = 1.0,
        min_repeat: int = 3,
        evidence_margin: float | None = None,
    ) -> list[Hypothesis]:
        """Beam search (``beam_size`` 1 = greedy) over all utterances at once; one best hypothesis each.

        ``max_tokens[i]`` caps utterance i's text tokens (at least 1, at most the decoder's 446 free
        positions). ``boosters[i]`` (optional) adds shallow-fusion scores to text tokens; the ranking score is
        ``sum_logprob + boost``, and finished hypotheses are ranked by it divided by
        ``len(tokens) ** length_penalty``.

        Loop guard: on unpadded short audio Whisper tends to repeat the whole transcript instead of ending
        it. When a hypothesis's tokens end with the same block of >= ``min_repeat`` tokens twice in a row,
        it is finished before the second copy (scored as of then, without an end-of-text log-probability).
        ``min_repeat=0`` disables this.

        ``evidence_margin``: a booster's positive score is added only to tokens whose own log-probability is
        within this many nats of the best token's at that step (a term is favoured where Whisper finds it
        plausible, not forced in against what it hears); None: everywhere.
        """
        b = encoded.shape[0]
        if len(max_tokens) != b:
            raise ValueError("max_tokens needs one entry per utterance")
        boosters = boosters if boosters is not None else [None] * b
        if len(boosters) != b:
            raise ValueError("boosters needs one entry per utterance")
        k = max(1, int(beam_size))
        dec = self.model.decoder
        room = dec.positions.shape[0] - len(self.prompt)  # the decoder's context bounds the output too
        limits = [max(1, min(int(m), room)) for m in max_tokens]
        any_booster = any(x is not None for x in boosters)
        cross, cross_mask = self._cross(encoded, lengths)
        boost_cache: dict[tuple[int, int], tuple[Tensor, np.ndarray]] = {}
        zeros = torch.zeros(self.vocab_size)

        def boost_of(i: int, state: int) -> tuple[Tensor, np.ndarray | None]:
            booster = boosters[i]
            if booster is None:
                return zeros, None
            hit = boost_cache.get((i, state))
            if hit is None:
                scores, nxt = booster.scores(state)
                vec = torch.from_numpy(np.asarray(scores, dtype=np.float32)).masked_fill(
                    ~self._text_mask, 0.0
                )
                hit = (vec, np.asarray(nxt, dtype=np.int64))
                boost_cache[(i, state)] = hit
            return hit

        # Prompt: one row per utterance, expanded to k rows after the first step.
        prompt = torch.tensor([self.prompt] * b)
        logits, cache = dec(prompt, 0, None, cross, cross_mask)
        no_speech = torch.softmax(logits[:, 0], dim=-1)[:, self.special.no_speech].tolist()
        step_logits = logits[:, -1]
        cache = [(kk.repeat_interleave(k, 0), vv.repeat_interleave(k, 0)) for kk, vv in cache]
        step_logits = step_logits.repeat_interleave(k, 0)
        beams: list[list[_Beam]] = []
        for i in range(b):
            init = boosters[i].initial_state() if boosters[i] is not None else 0  # type: ignore[union-attr]
            # Only the first beam is live at the first step (the others are copies).
            beams.append([_Beam([], 0.0 if j == 0 else float("-inf"), 0.0, init) for j in range(k)])
        finished: list[list[_Beam]] = [[] for _ in range(b)]
        active = list(range(b))  # utterances still in the decoder batch, in batch order
        offset = len(self.prompt)
        step = 0
        while active:
            logp = self._logprobs(step_logits, first=step == 0)  # [len(active) * k, V]
            boost_rows = []
            states_next: list[np.ndarray | None] = []
            for i in active:
                for beam in beams[i]:
                    vec, nxt = boost_of(i, beam.state)
                    boost_rows.append(vec)
                    states_next.append(nxt)
            boost = torch.stack(boost_rows) if any_booster else torch.zeros(1, 1).expand_as(logp)
            if any_booster and evidence_margin is not None:
                unsupported = (boost > 0) & (logp < logp.max(dim=-1, keepdim=True).values - evidence_margin)
                boost = boost.masked_fill(unsupported, 0.0)
            base = torch.tensor([beam.total for i in active for beam in beams[i]])
            cand = (logp + boost + base[:, None]).view(len(active), k * self.vocab_size)
            top_scores, top_idx = cand.topk(min(2 * k + 1, cand.shape[1]), dim=1)
            top_idx_l, top_scores_l = top_idx.tolist(), top_scores.tolist()
            keep_groups: list[int] = []
            source_rows: list[int] = []
            next_tokens: list[int] = []
            for g, i in enumerate(active):
                new: list[_Beam] = []
                rows_g: list[int] = []
                for score, flat in zip(top_scores_l[g], top_idx_l[g], strict=True):
                    if score == float("-inf"):
                        break
                    j, token = divmod(flat, self.vocab_size)
                    row = g * k + j
                    old = beams[i][j]
                    lp = old.logprob + float(logp[row, token])
                    bst = old.boost + float(boost[row, token])
                    if token == self.special.eot:
                        booster = boosters[i]
                        extra = booster.final_score(old.state) if booster is not None else 0.0
                        finished[i].append(_Beam(old.tokens, lp, bst + extra, old.state, ended=True))
                    else:
                        nxt = states_next[row]
                        state = int(nxt[token]) if nxt is not None else old.state
                        cand_beam = old.extended(token, lp, bst, state)
                        block = _repeated_block(cand_beam.tokens, min_repeat) if min_repeat > 0 else 0
                        if block:  # a loop: end the hypothesis before the repetition, like an end-of-text
                            cut = cand_beam.truncated(len(cand_beam.tokens) - block)
                            booster = boosters[i]
                            if booster is not None:
                                cut.boost += booster.final_score(cut.state)
                            finished[i].append(cut)
                        else:
                            new.append(cand_beam)
                            rows_g.append(row)
                    if len(new) == k:
                        break
                while len(new) < k:  # fewer live candidates than beams: pad with dead copies
                    filler = new[0] if new else beams[i][0]
                    new.append(_Beam(filler.tokens, float("-inf"), 0.0, filler.state))
                    rows_g.append(rows_g[0] if rows_g else g * k)
                beams[i] = new
                live = [x for x in new if x.logprob > float("-inf")]
                if len(finished[i]) >= k or not live or len(new[0].tokens) >= limits[i]:
                    if len(finished[i]) < k:  # out of token budget: rank the live beams too
                        finished[i].extend(live)
                else:
                    keep_groups.append(g)
                    source_rows.extend(rows_g)
                    next_tokens.extend(x.tokens[-1] if x.tokens else self.special.eot for x in new)
            active = [active[g] for g in keep_groups]
            if not active:
                break
            step += 1
            rows = torch.tensor(source_rows)
            cache = [(kk.index_select(0, rows), vv.index_select(0, rows)) for kk, vv in cache]
            if len(keep_groups) < len(cross[0][0]):
                groups = torch.tensor(keep_groups)
                cross = [(ck.index_select(0, groups), cv.index_select(0, groups)) for ck, cv in cross]
                cross_mask = None if cross_mask is None else cross_mask.index_select(0, groups)
            tokens = torch.tensor(next_tokens)[:, None]
            logits, cache = dec(tokens, offset, cache, cross, cross_mask)
            step_logits = logits[:, -1]
            offset += 1

        out = []
        for i in range(b):
            cands = finished[i] or beams[i][:1]

            def rank(x: _Beam) -> float:
                return x.total / max(1, len(x.tokens)) ** length_penalty

            best = max(cands, key=rank)
            n = len(best.tokens) + int(best.ended)
            out.append(
                Hypothesis(
                    tokens=list(best.tokens),
                    text=self.text(best.tokens),
                    sum_logprob=float(best.logprob),
                    avg_logprob=float(best.logprob) / max(1, n),
                    no_speech_prob=float(no_speech[i]),
                    boost=float(best.boost),
                )
            )
        return out

    # ------------------------------------------------------------------ rescoring

    @torch.inference_mode()
    def score(self, encoded: Tensor, lengths: Tensor, token_seqs: list[list[list[int]]]) -> list[list[float]]:
        """Teacher-forced sum log-probability of candidate texts: ``token_seqs[i]`` are utterance i's
        candidates (text tokens only; the prompt and end-of-text are added here). Uses the same token
        suppression as :meth:`decode`, so a decoded hypothesis scores its own ``sum_logprob``."""
        groups = [i for i, seqs in enumerate(token_seqs) for _ in seqs]
        seqs = [list(s) + [self.special.eot] for per in token_seqs for s in per]
        if not seqs:
            return [[] for _ in token_seqs]
        idx = torch.tensor(groups)
        enc = encoded.index_select(0, idx)
        cross, cross_mask = self._cross(enc, lengths.index_select(0, idx))
        p = len(self.prompt)
        width = max(len(s) for s in seqs)
        tokens = torch.full((len(seqs), p + width - 1), self.special.eot, dtype=torch.long)
        for r, s in enumerate(seqs):
            row = self.prompt + s[:-1]
            tokens[r, : len(row)] = torch.tensor(row)
        logits, _ = self.model.decoder(tokens, 0, None, cross, cross_mask)
        results: list[list[float]] = [[] for _ in token_seqs]
        for r, s in enumerate(seqs):
            lp = self._logprobs(logits[r, p - 1 : p - 1 + len(s)], first=False)
            first = self._logprobs(logits[r, p - 1], first=True)
            total = float(first[s[0]]) + float(lp[torch.arange(1, len(s)), torch.tensor(s[1:])].sum())
            results[groups[r]].append(total)
        return results
