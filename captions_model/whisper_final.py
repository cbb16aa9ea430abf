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

This module loads the model (and optionally quantizes it to dynamic int8) and encodes; the network is
``captions_model.whisper_network``, the beam search and rescoring ``captions_model.whisper_search``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor, nn

from captions_model.paths import FINAL_PASS_MODEL_PATH
from captions_model.whisper_network import (
    WhisperDecoder,
    WhisperEncoder,
    WhisperModel,
    log_mel,
    pack_state,
    unpack_state,
)
from captions_model.whisper_search import Booster, Hypothesis, SpecialTokens, WhisperSearch

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
MAX_SECONDS = 30.0

_M = TypeVar("_M", bound=nn.Module)


def _dynamic_int8(module: _M) -> _M:
    """``module`` with every ``nn.Linear`` replaced by a dynamically quantized int8 one (PyTorch eager); the
    module's own class and methods are kept (only submodules are swapped)."""
    with warnings.catch_warnings():  # eager-mode quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return cast(_M, torch.ao.quantization.quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8))


class FinalPassModel(WhisperSearch):
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
