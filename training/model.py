"""Build the embedded model: NeMo ``EncDecRNNTBPEModel`` = Whisper tiny.en encoder + small RNNT head.

Usage (creates a fresh model with Whisper weights and an untrained head)::

    python -m training.model --whisper training/work/whisper_tiny_en_encoder.pt \
        --tokenizer training/work/tokenizer --out training/work/init.nemo
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from omegaconf import OmegaConf

import captions_model.nemo_encoder  # noqa: F401 - registers our _target_ prefixes with NeMo

# ``transcribe()`` reads dataloader defaults from ``validation_ds``; with no manifest nothing loads at init.
VALIDATION_DS = {
    "manifest_filepath": None,
    "sample_rate": 16000,
    "batch_size": 8,
    "shuffle": False,
    "use_start_end_token": False,
}
PRED_HIDDEN = 320
JOINT_HIDDEN = 320


def model_config(tokenizer_dir: Path, hparams: dict, d_out: int = 384, n_top_layers: int = 0) -> dict:
    """The NeMo model config; encoder ``_target_`` is our module, everything else is stock NeMo 3.0.0."""
    return {
        "sample_rate": 16000,
        "model_defaults": {"enc_hidden": d_out, "pred_hidden": PRED_HIDDEN, "joint_hidden": JOINT_HIDDEN},
        "tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "NA",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": 80,
            "n_fft": 400,
            "log": True,
            "log_zero_guard_type": "clamp",
            "log_zero_guard_value": 1e-10,
            "frame_splicing": 1,
            "dither": 0.0,
            "pad_to": 0,
            "pad_value": 0.0,
            "preemph": None,
            "mag_power": 2.0,
            "mel_norm": "slaney",
        },
        "encoder": {
            "_target_": "captions_model.nemo_encoder.WhisperEncoder",
            "feat_in": 80,
            "d_model": hparams["d_model"],
            "n_layers": hparams["n_layers"],
            "n_heads": hparams["n_heads"],
            "stack_frames": 4,
            "d_out": d_out,
            "n_top_layers": n_top_layers,
            "top_heads": 6,
            "top_ff": 1536,
            "max_positions": 1500,
            "half_precision_state": True,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "prednet": {"pred_hidden": PRED_HIDDEN, "pred_rnn_layers": 1, "t_max": None, "dropout": 0.1},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "jointnet": {
                "joint_hidden": JOINT_HIDDEN,
                "activation": "relu",
                "dropout": 0.1,
                "encoder_hidden": d_out,
                "pred_hidden": PRED_HIDDEN,
            },
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "validation_ds": VALIDATION_DS,
        "loss": {"loss_name": "default"},
        "optim": {"name": "adamw", "lr": 1e-3},
    }


def build_model(
    tokenizer_dir: Path, whisper_path: Path | None = None, d_out: int = 384, n_top_layers: int = 0
):  # noqa: ANN201
    """A fresh EncDecRNNTBPEModel; loads Whisper encoder weights when ``whisper_path`` is given."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel

    ckpt = torch.load(whisper_path, map_location="cpu") if whisper_path else None
    hparams = ckpt["hparams"] if ckpt else {"d_model": 384, "n_layers": 4, "n_heads": 6}
    cfg = OmegaConf.create(model_config(tokenizer_dir, hparams, d_out, n_top_layers))
    model = EncDecRNNTBPEModel(cfg=cfg)
    if ckpt:
        missing, unexpected = model.encoder.load_state_dict(ckpt["state_dict"], strict=False)
        if unexpected or any(not k.startswith(("proj.", "top.")) for k in missing):
            raise RuntimeError(f"whisper weights do not fit: missing={missing} unexpected={unexpected}")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--whisper", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--top-layers", type=int, default=0, help="trainable transformer blocks at 80 ms")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = build_model(args.tokenizer, args.whisper, n_top_layers=args.top_layers)
    model.save_to(str(args.out))
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {n / 1e6:.2f} M parameters")


if __name__ == "__main__":
    main()
