"""Whisper encoder module: shapes, 80 ms frames, batch/length consistency, compact state; shipped model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from captions_model.nemo_encoder import LEGACY_TARGET_PREFIX, TARGET, TARGET_PREFIX, WhisperEncoder

torch.set_num_threads(1)

MODEL_PATH = Path(__file__).resolve().parents[2] / "models" / "captions-embedded.nemo"


def tiny_encoder() -> WhisperEncoder:
    torch.manual_seed(0)
    return WhisperEncoder(d_model=64, n_layers=2, n_heads=2, d_out=48, max_positions=200).eval()


def test_output_shape_and_80ms_frame_rate() -> None:
    enc = tiny_encoder()
    mel_frames = 301  # 3 s at 10 ms
    x = torch.randn(2, 80, mel_frames) - 5.0
    out, out_len = enc(audio_signal=x, length=torch.tensor([mel_frames, 160]))
    assert enc.subsampling_factor == 8
    assert out.shape == (2, 48, math.ceil(mel_frames / 8))
    assert out_len.tolist() == [math.ceil(mel_frames / 8), math.ceil(160 / 8)]


def test_padding_does_not_change_a_shorter_utterance() -> None:
    enc = tiny_encoder()
    x = torch.randn(2, 80, 240) - 5.0
    with torch.no_grad():
        batched, _ = enc(audio_signal=x, length=torch.tensor([240, 150]))
        alone, alone_len = enc(audio_signal=x[1:, :, :150], length=torch.tensor([150]))
    n = int(alone_len[0])
    torch.testing.assert_close(batched[1, :, :n], alone[0], atol=1e-4, rtol=1e-4)


def test_too_long_input_is_rejected() -> None:
    enc = tiny_encoder()
    with pytest.raises(ValueError, match="max_positions"):
        enc(audio_signal=torch.zeros(1, 80, 401), length=torch.tensor([401]))


def test_state_dict_stores_whisper_weights_in_half_and_loads_back() -> None:
    enc = tiny_encoder()
    state = enc.state_dict()
    assert state["conv1.weight"].dtype == torch.float16
    assert state["proj.weight"].dtype == torch.float16
    assert "positions" not in state
    other = WhisperEncoder(d_model=64, n_layers=2, n_heads=2, d_out=48, max_positions=200)
    other.load_state_dict(state)
    assert other.conv1.weight.dtype == torch.float32


def test_int8_state_stores_matrices_as_int8_and_restores_close_outputs() -> None:
    enc = tiny_encoder()
    enc.int8_weights = True
    state = enc.state_dict()
    assert state["conv1.weight"].dtype == torch.int8
    assert state["blocks.0.qkv.weight"].dtype == torch.int8
    assert state["proj.weight"].dtype == torch.int8
    assert state["proj.weight.int8_scale"].shape == (48,)
    assert state["proj.bias"].dtype == torch.float16  # vectors stay float16
    plain = WhisperEncoder(d_model=64, n_layers=2, n_heads=2, d_out=48, max_positions=200).eval()
    plain.load_state_dict(state)  # strict: the scales are consumed, whatever the flag of the loader
    assert plain.proj.weight.dtype == torch.float32
    err = (plain.proj.weight - enc.proj.weight).abs().max()
    assert 0 < err <= enc.proj.weight.abs().max() / 127
    x = torch.randn(1, 80, 240) - 5.0
    with torch.no_grad():
        ref, _ = enc(audio_signal=x, length=torch.tensor([240]))
        out, _ = plain(audio_signal=x, length=torch.tensor([240]))
    cos = torch.nn.functional.cosine_similarity(ref.flatten(), out.flatten(), dim=0)
    assert cos > 0.999


def test_quantize_encoder_runs_its_linear_layers_in_int8_with_close_outputs() -> None:
    """``CAPTIONS_ENGINE_INT8_ENCODER``: every nn.Linear becomes a dynamically quantized one (the
    convolutions stay float32) and the frames stay close to float32's."""
    from captions_model.nemo_encoder import quantize_encoder

    enc = tiny_encoder()
    x = torch.randn(1, 80, 240) - 5.0
    with torch.no_grad():
        ref, _ = enc(audio_signal=x, length=torch.tensor([240]))
        quantized = quantize_encoder(tiny_encoder())
        out, out_len = quantized(audio_signal=x, length=torch.tensor([240]))
    assert not any(type(m) is torch.nn.Linear for m in quantized.modules())
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in quantized.modules())
    assert isinstance(quantized.conv1, torch.nn.Conv1d)
    assert out.shape == ref.shape and out_len.tolist() == [30]
    cos = torch.nn.functional.cosine_similarity(ref.flatten(), out.flatten(), dim=0)
    assert 0.95 < cos < 1.0  # int8: close, not identical


def test_the_int8_encoder_setting_reaches_the_engine_config(tmp_path: Path) -> None:
    from backend.config import Settings, engine_config

    settings = Settings(data_dir=tmp_path, engine_int8_encoder=True)
    assert engine_config(settings).int8_encoder is True
    assert engine_config(Settings(data_dir=tmp_path)).int8_encoder is False


def test_target_prefix_is_allowed_by_nemo() -> None:
    from nemo.core.classes import common

    assert TARGET_PREFIX in common.ALLOWED_TARGET_PREFIXES
    assert LEGACY_TARGET_PREFIX in common.ALLOWED_TARGET_PREFIXES


@pytest.mark.parametrize("target", [TARGET, LEGACY_TARGET_PREFIX + "whisper_encoder.WhisperEncoder"])
def test_new_and_shipped_target_names_build_the_same_module(target: str) -> None:
    """New models name ``captions_model.nemo_encoder``; the shipped ``.nemo`` files name the old path."""
    from nemo.core.classes.common import Serialization
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {"_target_": target, "d_model": 64, "n_layers": 2, "n_heads": 2, "d_out": 48, "max_positions": 200}
    )
    module = Serialization.from_config_dict(cfg)
    assert type(module) is WhisperEncoder
    assert module.subsampling_factor == 8


@pytest.mark.skipif(not MODEL_PATH.exists(), reason="shipped model not present")
def test_shipped_model_restores_and_runs() -> None:
    from nemo.collections.asr.models import ASRModel

    model = ASRModel.restore_from(str(MODEL_PATH), map_location="cpu").eval()
    assert model.cfg.encoder._target_ == LEGACY_TARGET_PREFIX + "whisper_encoder.WhisperEncoder"
    assert model.cfg.preprocessor.window_stride * model.encoder.subsampling_factor == pytest.approx(0.08)
    with torch.inference_mode():
        audio = torch.zeros(1, 16000)
        feats, feat_len = model.preprocessor(input_signal=audio, length=torch.tensor([16000]))
        enc, enc_len = model.encoder(audio_signal=feats, length=feat_len)
    assert enc.shape[1] == model.cfg.joint.jointnet.encoder_hidden
    assert int(enc_len[0]) == math.ceil(int(feat_len[0]) / 8)


def test_new_top_blocks_start_as_identity() -> None:
    base = tiny_encoder()
    with_top = WhisperEncoder(
        d_model=64, n_layers=2, n_heads=2, d_out=48, n_top_layers=2, top_heads=2, top_ff=96, max_positions=200
    ).eval()
    missing, unexpected = with_top.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("top.") for k in missing)
    x = torch.randn(1, 80, 120) - 5.0
    with torch.no_grad():
        a, _ = base(audio_signal=x, length=torch.tensor([120]))
        b, _ = with_top(audio_signal=x, length=torch.tensor([120]))
    torch.testing.assert_close(a, b, atol=2e-3, rtol=1e-3)
