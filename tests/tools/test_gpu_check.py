"""Issue 28's GPU script, kept from rotting: its CPU dry run, and the model configs it builds.

``bench/gpu_check.sh`` is what a session with a lent GPU runs (docs/deploy.md, "GPU measurements"). The dry
run here is the same script through the same code (models built from NeMo's configs, the engine, both
benchmarks, the table), only with tiny model sizes, 1-2 streams, 1.12 s of audio and 20-term lists on CPU.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

STREAMS = (1, 2)
CHUNKS = (0.56, 1.12)
BIAS = ("none", "registered")
SCENARIOS = importlib.import_module("bench_registry").SCENARIOS  # the decoder rows the table must hold


def _expected_engine_rows() -> set[tuple]:
    rows = set()
    for model in ("parakeet_tdt", "cache_aware", "bundled"):
        for streams in STREAMS:
            for chunk_s in CHUNKS:
                for decoding in ("greedy", "beam"):
                    for bias in BIAS:
                        rows.add((model, streams, chunk_s, decoding, bias))
    return rows


@pytest.mark.slow
def test_gpu_check_dry_run_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PY": sys.executable,
        "OUT": str(out),
        "GPU_CHECK_PACK": str(tmp_path / "no-pack"),  # nothing to install: this virtualenv has NeMo
        "OMP_NUM_THREADS": "1",
    }
    args = [
        "--scale", "tiny", "--device", "cpu", "--streams", "2,1", "--chunks", "1.12,0.56",
        "--seconds", "1.12", "--decoder-audio-s", "1.12", "--terms", "20", "--beam-size", "2",
        "--repeats", "1", "--budget-s", "900", "--work", str(tmp_path / "work"),
    ]  # fmt: skip
    proc = subprocess.run(
        ["bash", "bench/gpu_check.sh", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    payload = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    assert payload["failures"] == [] and payload["skipped"] == []

    # the two random models were built from NeMo's configs, small
    for kind in ("parakeet_tdt", "cache_aware"):
        info = payload["models"][kind]
        assert info["random_weights"] and 50_000 < info["parameters"] < 2_000_000

    engine = payload["engine_rows"]
    got = {(r["model"], r["streams"], r["chunk_s"], r["decoding"], r["bias"]) for r in engine}
    assert got == _expected_engine_rows()
    for row in engine:
        assert math.isfinite(row["rtfx"]) and 0.05 < row["rtfx"] < 10_000, row
        assert row["audio_s"] == pytest.approx(1.12 * row["streams"], abs=0.02), row  # every chunk decoded
        assert row["gpu_mb_per_stream"] is None and row["cuda_graphs"] == "-"

    decoder = payload["decoder_rows"]
    assert {(r["streams"], r["scenario"], r["cuda_graphs"]) for r in decoder} == {
        (n, s, "off") for n in STREAMS for s in SCENARIOS
    }
    for row in decoder:
        assert math.isfinite(row["rtfx"]) and row["rtfx"] > 0 and row["labels"] >= 0, row

    # ONE Table-III-shaped table: a row per configuration, RTFx per stream count, then ratios and capacity
    report = (out / "gpu_check.md").read_text(encoding="utf-8")
    assert report in proc.stdout.replace("\r", "")
    lines = report.splitlines()
    header = (
        "| model | level | chunk s | decoding | biasing | CUDA graphs | RTFx @1 | RTFx @2 "
        "| GPU MB/stream @2 | words/s |"
    )
    start = lines.index(header)
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    assert len(table) == 8 + 8 + 8 + len(SCENARIOS)  # parakeet, cache-aware, bundled, decoder scenarios
    for cells in table:
        assert len(cells) == 10
        assert all(float(cells[i]) > 0 for i in (6, 7)), cells
    assert "| parakeet_tdt | engine | 1.12 | greedy | per-stream, registered | - |" in report
    assert "| parakeet_tdt decoder | decoder | 0.56 | greedy | no cache | off |" in report
    assert "greedy: per-stream, registered / no biasing" in report
    assert "none: beam / greedy" in report
    for chunk_s in ("0.56", "1.12"):  # the cache-aware model's beam rows and ratios (issue 38)
        row = f"| cache_aware | engine | {chunk_s} |"
        assert f"{row} beam | per-stream, registered | - |" in report
        assert f"{row} - | per-stream, registered: beam / greedy |" in report
        assert f"{row} - | beam: per-stream, registered / no biasing |" in report
    assert "| model | chunk s | greedy, none | greedy, per-stream, registered | beam, none |" in report
    assert (out / "gpu_check.log").is_file()


def test_model_configs_have_the_published_shapes_built_from_nemo_modules(tmp_path: Path) -> None:
    from gpu_models import model_config

    full = model_config("parakeet_tdt", "full", tmp_path)  # nvidia/parakeet-tdt-0.6b-v2's shape
    assert full.encoder._target_ == "nemo.collections.asr.modules.ConformerEncoder"
    assert full.preprocessor._target_ == "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor"
    assert full.decoder._target_ == "nemo.collections.asr.modules.RNNTDecoder"
    assert full.joint._target_ == "nemo.collections.asr.modules.RNNTJoint"
    assert (full.encoder.d_model, full.encoder.n_layers, full.encoder.n_heads) == (1024, 24, 8)
    assert full.encoder.subsampling == "dw_striding" and full.encoder.subsampling_factor == 8
    assert list(full.encoder.att_context_size) == [-1, -1] and full.encoder.att_context_style == "regular"
    assert full.preprocessor.features == 80 and full.preprocessor.normalize == "per_feature"
    assert (full.decoder.prednet.pred_hidden, full.decoder.prednet.pred_rnn_layers) == (640, 2)
    assert full.joint.jointnet.joint_hidden == 640 and full.joint.num_extra_outputs == 5
    assert list(full.decoding.durations) == [0, 1, 2, 3, 4] and full.decoding.model_type == "tdt"
    assert full.loss.loss_name == "tdt" and list(full.loss.tdt_kwargs.durations) == [0, 1, 2, 3, 4]
    assert list(full.model_defaults.tdt_durations) == [0, 1, 2, 3, 4]
    assert "train_ds" not in full and full.tokenizer.dir == str(tmp_path)

    streaming = model_config("cache_aware", "full", tmp_path)  # FastConformer L cache-aware streaming
    assert (streaming.encoder.d_model, streaming.encoder.n_layers, streaming.encoder.n_heads) == (512, 17, 8)
    assert [list(c) for c in streaming.encoder.att_context_size] == [[70, 13], [70, 6]]
    assert streaming.encoder.att_context_style == "chunked_limited"
    assert streaming.encoder.conv_context_size == "causal" and streaming.encoder.causal_downsampling
    assert streaming.preprocessor.normalize == "NA"
    assert (streaming.decoder.prednet.pred_hidden, streaming.decoder.prednet.pred_rnn_layers) == (640, 1)
    assert streaming.loss.loss_name == "default" and "model_type" not in streaming.decoding

    for kind in ("parakeet_tdt", "cache_aware"):  # tiny keeps every structural choice, shrinks sizes only
        big, tiny = model_config(kind, "full", tmp_path), model_config(kind, "tiny", tmp_path)
        assert tiny.encoder.d_model < big.encoder.d_model and tiny.encoder.n_layers < big.encoder.n_layers
        assert tiny.decoder.prednet.pred_hidden < big.decoder.prednet.pred_hidden
        sizes = {"d_model", "n_layers", "n_heads", "subsampling_conv_channels", "ff_expansion_factor"}
        assert {k: v for k, v in tiny.encoder.items() if k not in sizes} == {
            k: v for k, v in big.encoder.items() if k not in sizes
        }
        assert tiny.preprocessor == big.preprocessor
        assert tiny.decoder.prednet.pred_rnn_layers == big.decoder.prednet.pred_rnn_layers
        assert tiny.get("loss") == big.get("loss") and tiny.decoding == big.decoding
