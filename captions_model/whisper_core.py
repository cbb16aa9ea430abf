"""Whisper's audio encoder at NeMo's 80 ms frame rate, in plain PyTorch (no NeMo import).

``WhisperCore`` holds the layers and the computation of the embedded model's encoder. The NeMo module
(``captions_model.nemo_encoder.WhisperEncoder``, which the shipped ``.nemo`` names by its old path) is this
class plus NeMo's typed-module interface; ``training/plain.py`` uses this class alone, so the GPU training
script runs where only PyTorch is installed. Both have the same state-dict keys.

Input is NeMo's natural-log mel spectrogram (``AudioToMelSpectrogramPreprocessor`` with 80 bins, 25 ms window,
10 ms stride, no normalisation, no dither, no pre-emphasis). The module rescales it the way Whisper does
(log10, floor at max - 8 per utterance, ``(x + 4) / 4``), runs Whisper's encoder (two convolutions, the second
with stride 2, sinusoidal positions, pre-norm transformer blocks) on the unpadded utterance, and stacks
``stack_frames`` consecutive 20 ms outputs into one projected 80 ms frame: 8x subsampling in total.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["WhisperBlock", "WhisperCore", "dequantize_int8", "quantize_int8", "sinusoids"]

_LN10 = math.log(10.0)


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> Tensor:
    """Whisper's encoder position table, shape [length, channels] (sines then cosines)."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(channels // 2, dtype=torch.float32))
    scaled = torch.arange(length, dtype=torch.float32)[:, None] * inv_timescales[None, :]
    return torch.cat([scaled.sin(), scaled.cos()], dim=1)


_SCALE = ".int8_scale"


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric int8 per output channel (dim 0): ``(q int8, scale float32 [out])``; ``w ~ q * scale``."""
    flat = weight.detach().float().reshape(weight.shape[0], -1)
    scale = flat.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(flat / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(weight.shape), scale


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    return (q.float().reshape(q.shape[0], -1) * scale.float()[:, None]).reshape(q.shape)


class WhisperBlock(nn.Module):
    """One pre-norm transformer block of Whisper's encoder (fused QKV, exact GELU MLP)."""

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int | None = None, identity_init: bool = False
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.attn_ln = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.mlp_ln = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff or 4 * d_model)
        self.fc2 = nn.Linear(d_ff or 4 * d_model, d_model)
        if identity_init:  # residual branches start at zero: a new block is the identity until trained
            for layer in (self.out, self.fc2):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, x: Tensor, attn_mask: Tensor | None) -> Tensor:
        """x: [B, T, D]; attn_mask: bool [B, 1, 1, T], True where a key may be attended, or None."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_ln(x)).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=attn_mask
        )
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.mlp_ln(x))))


class WhisperCore(nn.Module):
    """Whisper encoder followed by frame stacking to 80 ms frames and optional trainable top blocks.

    Args:
        feat_in: mel bins of the input (Whisper uses 80).
        d_model: Whisper's width (tiny: 384, base: 512).
        n_layers: transformer blocks (tiny: 4, base: 6).
        n_heads: attention heads (tiny: 6, base: 8).
        stack_frames: Whisper frames (20 ms each) stacked into one output frame.
        d_out: width of the output frames (a linear projection of the stacked frames).
        n_top_layers: pre-norm transformer blocks (width ``d_out``) on the 80 ms frames, trained here.
        top_heads: attention heads of those blocks.
        top_ff: feed-forward width of those blocks.
        max_positions: longest Whisper frame sequence accepted (1500 = 30 s, what Whisper was trained on).
        half_precision_state: store the weights as float16 in ``state_dict`` to halve the checkpoint
            (Whisper's own are float16 in its release); loading casts them back to float32, computation is
            float32.
        int8_weights: with ``half_precision_state``, store every weight matrix and convolution kernel as int8
            with one float32 scale per output channel (``<key>.int8_scale``) instead of float16: the file
            halves again (the embedded model's encoder: ~15 MB instead of ~31 MB). Loading dequantizes to
            float32 whatever the flag, so a model saved either way restores in any configuration.

    Shapes: ``audio_signal`` [B, feat_in, T] natural-log mel at 10 ms, ``length`` [B] ->
    ``(encoded [B, d_out, ceil(T / 8)], encoded_len [B])`` for ``stack_frames=4``.
    """

    def __init__(
        self,
        feat_in: int = 80,
        d_model: int = 384,
        n_layers: int = 4,
        n_heads: int = 6,
        stack_frames: int = 4,
        d_out: int = 384,
        n_top_layers: int = 0,
        top_heads: int = 6,
        top_ff: int = 1536,
        max_positions: int = 1500,
        half_precision_state: bool = True,
        int8_weights: bool = False,
    ) -> None:
        super().__init__()
        self._feat_in = feat_in
        self.d_model = d_model
        self.stack_frames = stack_frames
        self.subsampling_factor = 2 * stack_frames
        self.max_positions = max_positions
        self.half_precision_state = half_precision_state
        self.int8_weights = int8_weights
        self.conv1 = nn.Conv1d(feat_in, d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.blocks = nn.ModuleList([WhisperBlock(d_model, n_heads) for _ in range(n_layers)])
        self.ln_post = nn.LayerNorm(d_model)
        self.proj = nn.Linear(stack_frames * d_model, d_out)
        self.top = nn.ModuleList(
            [WhisperBlock(d_out, top_heads, top_ff, identity_init=True) for _ in range(n_top_layers)]
        )
        self.positions: Tensor
        self.register_buffer("positions", sinusoids(max_positions, d_model), persistent=False)
        self._register_state_dict_hook(WhisperCore._compact_state)
        self._register_load_state_dict_pre_hook(WhisperCore._dequantize_state)

    @staticmethod
    def _compact_state(module: nn.Module, state: OrderedDict, prefix: str, local_metadata: dict) -> None:
        if not getattr(module, "half_precision_state", False):
            return
        int8 = getattr(module, "int8_weights", False)
        for key in list(state):
            if not (key.startswith(prefix) and state[key].is_floating_point()):
                continue
            if int8 and key.endswith(".weight") and state[key].dim() >= 2:
                state[key], state[key + _SCALE] = quantize_int8(state[key])
            else:
                state[key] = state[key].half()

    @staticmethod
    def _dequantize_state(state: dict, prefix: str, *args: object) -> None:
        for key in [k for k in state if k.startswith(prefix) and k.endswith(_SCALE)]:
            weight = key[: -len(_SCALE)]
            state[weight] = dequantize_int8(state[weight], state.pop(key))

    def whisper_features(self, audio_signal: Tensor, length: Tensor) -> Tensor:
        """Natural-log mel [B, F, T] -> Whisper-scaled log mel, zero past each utterance's length."""
        valid = torch.arange(audio_signal.shape[-1], device=audio_signal.device)[None, :] < length[:, None]
        x = audio_signal / _LN10
        peak = x.masked_fill(~valid[:, None, :], float("-inf")).amax(dim=(1, 2), keepdim=True)
        x = (torch.maximum(x, peak - 8.0) + 4.0) / 4.0
        return x.masked_fill(~valid[:, None, :], 0.0)

    def whisper_encode(self, audio_signal: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        """Whisper's encoder on natural-log mel: ([B, ceil(T/2), d_model], lengths [B]) at 20 ms per frame."""
        x = self.whisper_features(audio_signal, length)
        valid = torch.arange(x.shape[-1], device=x.device)[None, None, :] < length[:, None, None]
        x = F.gelu(self.conv1(x)) * valid
        x = F.gelu(self.conv2(x)).transpose(1, 2)
        t = x.shape[1]
        if t > self.max_positions:
            raise ValueError(f"input of {t} Whisper frames exceeds max_positions={self.max_positions}")
        x = x + self.positions[:t].to(x.dtype)
        enc_len = torch.div(length + 1, 2, rounding_mode="floor")
        mask = None
        if bool((enc_len < t).any()):
            mask = (torch.arange(t, device=x.device)[None, :] < enc_len[:, None])[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_post(x), enc_len

    def head(self, x: Tensor, enc_len: Tensor) -> tuple[Tensor, Tensor]:
        """Whisper frames [B, T, D] (20 ms) -> stacked, projected, top blocks: ([B, d_out, T'], lengths)."""
        y, out_len = self.stack(x, enc_len)
        if not self.top:
            return y.transpose(1, 2), out_len
        t = y.shape[1]
        mask = None
        if bool((out_len < t).any()):
            mask = (torch.arange(t, device=y.device)[None, :] < out_len[:, None])[:, None, None, :]
        for block in self.top:
            y = block(y, mask)
        return y.transpose(1, 2), out_len

    def stack(self, x: Tensor, enc_len: Tensor) -> tuple[Tensor, Tensor]:
        """Stack Whisper frames [B, T, D] (zeroed past enc_len) and project: ([B, T', d_out], lengths)."""
        b, t, d = x.shape
        valid = torch.arange(t, device=x.device)[None, :] < enc_len[:, None]
        x = x.masked_fill(~valid[..., None], 0.0)
        pad = (-t) % self.stack_frames
        x = F.pad(x, (0, 0, 0, pad)).reshape(b, (t + pad) // self.stack_frames, self.stack_frames * d)
        out_len = torch.div(enc_len + self.stack_frames - 1, self.stack_frames, rounding_mode="floor")
        return self.proj(x), out_len

    def forward(self, audio_signal: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        x, enc_len = self.whisper_encode(audio_signal, length)
        return self.head(x, enc_len)
