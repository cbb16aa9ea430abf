"""RANDOM-weight NeMo Transducers (no download) for bench/gpu_check.py, from configs written here.

The ``model`` configs are our own (``model_config``: a Python dict, like ``tests/support/tiny_model.py``),
written from the published model shapes and built with NeMo's own modules and classes
(``AudioToMelSpectrogramPreprocessor``, ``ConformerEncoder``, ``RNNTDecoder``, ``RNNTJoint``,
``EncDecRNNTBPEModel``); no NeMo config file is copied:
- ``parakeet_tdt``: the shape of ``nvidia/parakeet-tdt-0.6b-v2`` (FastConformer XL TDT): 80 mel features,
  8x depthwise-striding subsampling, d_model 1024, 8 heads, 24 layers, conv kernel 9, relative positions with
  unlimited attention context, a 2-layer LSTM prediction network and a joint of 640, TDT durations 0-4,
  1,024 BPE pieces: 616.7 M parameters;
- ``cache_aware``: FastConformer L cache-aware streaming: d_model 512, 8 heads, 17 layers, causal
  downsampling and convolutions, chunked-limited attention with the multi look-ahead ``att_context_size``
  [[70, 13], [70, 6]] (1.12 s and 0.56 s chunks), un-normalised features, a 1-layer prediction network and a
  joint of 640, RNNT, 1,024 BPE pieces: 114.2 M parameters.

``scale="tiny"`` keeps every structural choice (subsampling, attention style and contexts, TDT, number of
prediction layers) and shrinks only the sizes (layers, widths, vocabulary), so the CPU dry run builds and
serves the same model classes through the same code. The tokenizer is a SentencePiece BPE trained here on
generated text (``bench_biasing``'s term generator: the same kind of words the benchmark's lists hold).

Random weights say nothing about accuracy; the blank logit is calibrated (``calibrate_blank``) so that the
greedy decoder emits a label on about ``1 - blank_share`` of the encoder frames, like speech, instead of a
label on every frame (10 per frame at most) or none at all: decoding cost depends on it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

MODEL_KINDS = ("parakeet_tdt", "cache_aware")
Scale = Literal["full", "tiny"]

_TDT_DURATIONS = [0, 1, 2, 3, 4]

# key: (full value, tiny value); the full values are the published model shapes.
_SIZES: dict[str, dict[str, tuple[Any, Any]]] = {
    "parakeet_tdt": {
        "encoder.d_model": (1024, 64),
        "encoder.n_heads": (8, 2),
        "encoder.n_layers": (24, 2),
        "encoder.subsampling_conv_channels": (256, 32),
        "encoder.ff_expansion_factor": (4, 2),
        "model_defaults.pred_hidden": (640, 48),
        "model_defaults.joint_hidden": (640, 48),
        "decoder.prednet.pred_rnn_layers": (2, 2),
        "vocab_size": (1024, 128),
    },
    "cache_aware": {
        "encoder.d_model": (512, 64),
        "encoder.n_heads": (8, 2),
        "encoder.n_layers": (17, 2),
        "encoder.subsampling_conv_channels": (256, 32),
        "encoder.ff_expansion_factor": (4, 2),
        "model_defaults.pred_hidden": (640, 48),
        "model_defaults.joint_hidden": (640, 48),
        "decoder.prednet.pred_rnn_layers": (1, 1),
        "vocab_size": (1024, 128),
    },
}


@dataclass(frozen=True)
class BuiltModel:
    kind: str
    path: Path
    parameters: int
    build_s: float
    blank_bias: float


def train_tokenizer(work_dir: Path, vocab_size: int) -> Path:
    """A SentencePiece BPE (NeMo's ``create_spt_model``) on generated sentences; returns its directory
    (trained once per ``work_dir`` and size: the models of a run share it, and so their compiled lists)."""
    from bench_biasing import FILLER, generate_terms
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    rng = random.Random(1)
    names = generate_terms(3000, seed=99)
    lines = []
    for _ in range(6000):
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))] + [rng.choice(names)]
        rng.shuffle(words)
        text = " ".join(words)
        lines.append(text.capitalize() if rng.random() < 0.5 else text)
    tokenizer_dir = work_dir / f"tokenizer_{vocab_size}"
    if (tokenizer_dir / "tokenizer.model").is_file():  # one tokenizer for every model of this size
        return tokenizer_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    text_path = work_dir / f"tokenizer_text_{vocab_size}.txt"
    text_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    create_spt_model(
        str(text_path),
        vocab_size=vocab_size,
        sample_size=-1,
        do_lower_case=False,
        tokenizer_type="bpe",
        output_dir=str(tokenizer_dir),
    )
    return tokenizer_dir


def _model_dict(kind: str, scale: Scale, tokenizer_dir: Path) -> dict[str, Any]:
    """The ``model`` config of ``kind`` as a plain dict (inference only: no data sets, no dropout)."""
    size = {key: values[0 if scale == "full" else 1] for key, values in _SIZES[kind].items()}
    streaming = kind == "cache_aware"
    d_model = size["encoder.d_model"]
    pred_hidden, joint_hidden = size["model_defaults.pred_hidden"], size["model_defaults.joint_hidden"]
    cfg: dict[str, Any] = {
        "sample_rate": 16000,
        "compute_eval_loss": False,
        "log_prediction": False,
        "model_defaults": {"enc_hidden": d_model, "pred_hidden": pred_hidden, "joint_hidden": joint_hidden},
        "tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "NA" if streaming else "per_feature",  # streaming: no utterance statistics
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": 80,
            "n_fft": 512,
            "frame_splicing": 1,
            "dither": 0.0,
            "pad_to": 0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": 80,
            "feat_out": -1,
            "n_layers": size["encoder.n_layers"],
            "d_model": d_model,
            "subsampling": "dw_striding",
            "subsampling_factor": 8,
            "subsampling_conv_channels": size["encoder.subsampling_conv_channels"],
            "causal_downsampling": streaming,
            "ff_expansion_factor": size["encoder.ff_expansion_factor"],
            "self_attention_model": "rel_pos",
            "n_heads": size["encoder.n_heads"],
            # 70 frames of left context and 13 or 6 of look-ahead: 1.12 s and 0.56 s chunks (80 ms frames)
            "att_context_size": [[70, 13], [70, 6]] if streaming else [-1, -1],
            "att_context_probs": None,
            "att_context_style": "chunked_limited" if streaming else "regular",
            "xscaling": True,
            "untie_biases": True,
            "pos_emb_max_len": 5000,
            "conv_kernel_size": 9,
            "conv_norm_type": "layer_norm" if streaming else "batch_norm",
            "conv_context_size": "causal" if streaming else None,
            "dropout": 0.0,
            "dropout_pre_encoder": 0.0,
            "dropout_emb": 0.0,
            "dropout_att": 0.0,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "prednet": {
                "pred_hidden": pred_hidden,
                "pred_rnn_layers": size["decoder.prednet.pred_rnn_layers"],
                "t_max": None,
                "dropout": 0.0,
            },
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "jointnet": {"joint_hidden": joint_hidden, "activation": "relu", "dropout": 0.0},
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "default"},
    }
    if kind == "parakeet_tdt":  # Token-and-Duration Transducer: 5 durations, TDT decoding and loss
        cfg["model_defaults"]["tdt_durations"] = list(_TDT_DURATIONS)
        cfg["model_defaults"]["num_tdt_durations"] = len(_TDT_DURATIONS)
        cfg["joint"]["num_extra_outputs"] = len(_TDT_DURATIONS)
        cfg["decoding"].update(model_type="tdt", durations=list(_TDT_DURATIONS))
        cfg["loss"] = {
            "loss_name": "tdt",
            "tdt_kwargs": {
                "fastemit_lambda": 0.001,
                "clamp": -1.0,
                "durations": list(_TDT_DURATIONS),
                "sigma": 0.05,
                "omega": 0.1,
            },
        }
    return cfg


def model_config(kind: str, scale: Scale, tokenizer_dir: Path):
    """The ``model`` config (an OmegaConf ``DictConfig``) of ``kind`` at ``scale``: see ``_model_dict``."""
    from omegaconf import OmegaConf

    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind must be one of {MODEL_KINDS}, got {kind!r}")
    if scale not in ("full", "tiny"):
        raise ValueError(f"scale must be 'full' or 'tiny', got {scale!r}")
    return OmegaConf.create(_model_dict(kind, scale, tokenizer_dir))


def calibrate_blank(model: Any, blank_share: float = 0.75, seconds: float = 4.0) -> float:
    """Raise the blank logit so that blank wins on ``blank_share`` of the frames of babble (from the start
    state of the prediction network); returns the bias added."""
    from bench_engine import babble

    joint = model.joint
    blank = joint.num_classes_with_blank - 1
    signal = torch.from_numpy(np.stack([babble(seed, seconds) for seed in range(2)]))
    lengths = torch.full([signal.shape[0]], signal.shape[1], dtype=torch.long)
    with torch.inference_mode():
        features, feature_lengths = model.preprocessor(input_signal=signal, length=lengths)
        encoded, _ = model.encoder(audio_signal=features, length=feature_lengths)
        prednet, *_ = model.decoder.predict(None, None, add_sos=False, batch_size=signal.shape[0])
        logits = joint.joint_after_projection(
            joint.project_encoder(encoded.transpose(1, 2)), joint.project_prednet(prednet)
        )[..., : blank + 1]
        margin = (logits[..., :blank].max(dim=-1).values - logits[..., blank]).flatten()
        bias = float(torch.quantile(margin.float(), blank_share))
        joint.joint_net[-1].bias[blank] += bias
    return bias


def build_model(kind: str, work_dir: Path, scale: Scale = "full", seed: int = 0) -> BuiltModel:
    """Build, calibrate and save ``work_dir/{kind}-{scale}.nemo`` (random weights)."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel

    started = time.perf_counter()
    vocab_size = _SIZES[kind]["vocab_size"][0 if scale == "full" else 1]
    tokenizer_dir = train_tokenizer(work_dir, vocab_size)
    torch.manual_seed(seed)
    model = EncDecRNNTBPEModel(cfg=model_config(kind, scale, tokenizer_dir)).eval()
    bias = calibrate_blank(model)
    path = work_dir / f"{kind}-{scale}.nemo"
    model.save_to(str(path))
    parameters = sum(p.numel() for p in model.parameters())
    del model
    return BuiltModel(kind, path, parameters, time.perf_counter() - started, bias)
