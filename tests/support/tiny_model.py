"""A tiny RANDOM NeMo Transducer (RNNT or TDT, BPE) built from a config: for tests and the benchmark.

No downloads: the SentencePiece tokenizer is trained on a small built-in corpus in ``work_dir``. The weights
are random, so outputs are meaningless text; tests compare outputs between decoding set-ups, never accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

_CORPUS = (
    "the quick brown fox jumps over the lazy dog",
    "linezolid husqvarna meeting agenda budget quarterly revenue",
    "please share the slides about the captioning server roadmap",
    "streaming speech recognition with context biasing works in real time",
    "every stream has its own vocabulary of names places and products",
    "numbers like twenty one and forty two appear in earnings calls",
)


def _train_tokenizer(work_dir: Path, vocab_size: int) -> Path:
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    text_path = work_dir / "corpus.txt"
    text_path.write_text("\n".join(_CORPUS * 20) + "\n", encoding="utf-8")
    tokenizer_dir = work_dir / "tokenizer"
    create_spt_model(
        str(text_path),
        vocab_size=vocab_size,
        sample_size=-1,
        do_lower_case=True,
        tokenizer_type="bpe",
        output_dir=str(tokenizer_dir),
    )
    return tokenizer_dir


_WHISPER_ENCODER = "captions_model.nemo_encoder.WhisperEncoder"


Encoder = Literal["conformer", "whisper", "cache_aware"]


def _model_config(tokenizer_dir: Path, kind: Literal["rnnt", "tdt"], d_model: int, encoder: Encoder) -> dict:
    durations = [0, 1, 2, 3, 4]
    cfg: dict = {
        "sample_rate": 16000,
        "model_defaults": {"enc_hidden": d_model, "pred_hidden": d_model},
        "tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": 80,
            "n_fft": 512,
            "dither": 0.0,
            "pad_to": 0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": 80,
            "n_layers": 1,
            "d_model": d_model,
            "subsampling": "dw_striding",
            "subsampling_factor": 8,
            "subsampling_conv_channels": d_model,
            "ff_expansion_factor": 2,
            "self_attention_model": "rel_pos",
            "n_heads": 2,
            "att_context_size": [-1, -1],
            "conv_kernel_size": 9,
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
            "prednet": {"pred_hidden": d_model, "pred_rnn_layers": 1, "dropout": 0.0},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "jointnet": {
                "joint_hidden": d_model,
                "activation": "relu",
                "dropout": 0.0,
                "encoder_hidden": d_model,
                "pred_hidden": d_model,
            },
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "default"},
        "optim": {"name": "adam", "lr": 1e-3},
    }
    if encoder == "whisper":  # like the bundled model: Whisper's encoder on un-normalised log mel
        cfg["preprocessor"]["normalize"] = "NA"
        cfg["encoder"] = {
            "_target_": _WHISPER_ENCODER,
            "feat_in": 80,
            "d_model": d_model,
            "n_layers": 1,
            "n_heads": 2,
            "stack_frames": 4,
            "d_out": d_model,
        }
    if encoder == "cache_aware":  # a cache-aware FastConformer with 0.56 s and 1.12 s look-aheads
        cfg["preprocessor"]["normalize"] = "NA"
        cfg["encoder"].update(
            att_context_size=[[70, 13], [70, 6]],
            att_context_style="chunked_limited",
            conv_context_size="causal",
            causal_downsampling=True,
            self_attention_model="rel_pos",
        )
    if kind == "tdt":
        cfg["model_defaults"].update(tdt_durations=durations, num_tdt_durations=len(durations))
        cfg["joint"]["num_extra_outputs"] = len(durations)
        cfg["decoding"] = {
            "strategy": "greedy_batch",
            "model_type": "tdt",
            "durations": durations,
            "greedy": {"max_symbols": 10},
        }
        cfg["loss"] = {
            "loss_name": "tdt",
            "tdt_kwargs": {"durations": durations, "sigma": 0.02, "omega": 0.1},
        }
    return cfg


def _diversify_joint(model, kind: str) -> None:
    """Random joints tend to emit one label forever; these scales give varied text from varied audio."""
    output = model.joint.joint_net[-1]
    blank_index = model.joint.num_classes_with_blank - 1
    std, blank_bias, enc_scale, pred_scale = (4.0, 0.7, 4.0, 0.25) if kind == "tdt" else (1.0, 0.5, 1.0, 1.0)
    with torch.no_grad():
        torch.nn.init.normal_(output.weight, std=std / output.in_features**0.5)
        output.bias.zero_()
        output.bias[blank_index] = blank_bias
        model.joint.enc.weight.mul_(enc_scale)
        model.joint.pred.weight.mul_(pred_scale)


def build_tiny_transducer(
    work_dir: Path,
    kind: Literal["rnnt", "tdt"] = "rnnt",
    seed: int = 0,
    vocab_size: int = 64,
    d_model: int = 32,
    encoder: Encoder = "conformer",
) -> Path:
    """Build a random tiny BPE Transducer and save it as ``work_dir/tiny-{kind}-{encoder}.nemo`` (returned).

    ``encoder="whisper"`` uses our ``WhisperEncoder`` (as the bundled model does) instead of a Conformer;
    ``encoder="cache_aware"`` makes a cache-aware streaming Conformer (NeMo's cache-aware pipeline)."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    if encoder == "whisper":
        import captions_model.nemo_encoder  # noqa: F401  (allows its ``_target_``)

    work_dir.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = _train_tokenizer(work_dir, vocab_size)
    torch.manual_seed(seed)
    model = EncDecRNNTBPEModel(cfg=OmegaConf.create(_model_config(tokenizer_dir, kind, d_model, encoder)))
    _diversify_joint(model, kind)
    model.eval()
    path = work_dir / f"tiny-{kind}-{encoder}.nemo"
    model.save_to(str(path))
    return path
