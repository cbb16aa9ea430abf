"""Whisper's network in plain PyTorch, for the final pass: log-mel features, the audio encoder on unpadded
batched utterances, the text decoder with a self-attention KV cache and per-utterance cross-attention, and
the shipped weights' packing (int8 per output channel for matrices, float16 for the rest).

``captions_model.whisper_final.FinalPassModel`` loads these and ``captions_model.whisper_search`` decodes
with them; ``scripts/export_final_pass.py`` fills a ``WhisperModel`` from the CTranslate2 release.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captions_model.whisper_core import WhisperBlock, dequantize_int8, quantize_int8, sinusoids

__all__ = [
    "DecoderBlock",
    "WhisperDecoder",
    "WhisperEncoder",
    "WhisperModel",
    "log_mel",
    "pack_state",
    "unpack_state",
]

N_FFT = 400
HOP = 160
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
