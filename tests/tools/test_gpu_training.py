"""The GPU route of the training recipe (``training/gpu_train.sh``): ``training/plain.py`` computes what NeMo
computes for the shipped model, so the device script (which runs where NeMo is not installed) trains the same
network; the synthesis, encoding and training stages run with NeMo hidden; and the weights it returns load
back into the NeMo model and export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from backend.config import REPO_ROOT
from tests.support.speech import spoken
from training.features import load_model, whisper_frames, whisper_frames_batch
from training.plain import load_plain, load_shards, save_shards, word_error_rate
from training.synth import make_jobs
from training.train import batch_loss, collate

pytestmark = pytest.mark.slow
MODEL = REPO_ROOT / "models" / "captions-embedded.nemo"
SENTENCES = [
    "The weather is quite pleasant today, and the children are playing in the garden.",
    "Please send the minutes of the meeting to everyone.",
]


@pytest.fixture(scope="module")
def models() -> tuple:
    torch.set_num_threads(1)
    return load_model(MODEL), load_plain(MODEL)


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> list[torch.Tensor]:
    return [torch.from_numpy(spoken(s, tmp_path_factory.mktemp("wav"))) for s in SENTENCES]


def _batch(audio: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.nn.utils.rnn.pad_sequence(audio, batch_first=True), torch.tensor([a.numel() for a in audio])


@torch.inference_mode()
def test_features_and_encoder_match_nemo(models: tuple, audio: list[torch.Tensor]) -> None:
    nemo, plain = models
    x, n = _batch(audio)
    mel_n, len_n = nemo.preprocessor(input_signal=x, length=n)
    mel_p, len_p = plain.preprocessor(input_signal=x, length=n)
    assert torch.equal(len_n, len_p)
    assert mel_n.shape == mel_p.shape
    torch.testing.assert_close(mel_p, mel_n, atol=1e-4, rtol=1e-4)
    enc_n, elen_n = nemo.encoder(audio_signal=mel_n, length=len_n)
    enc_p, elen_p = plain.encoder(mel_p, len_p)
    assert torch.equal(elen_n, elen_p)
    torch.testing.assert_close(enc_p, enc_n, atol=1e-3, rtol=1e-3)


@torch.inference_mode()
def test_decoder_joint_and_loss_match_nemo(models: tuple) -> None:
    nemo, plain = models
    items = [{"feats": torch.randn(60 + 7 * i, 384).half(), "text": s} for i, s in enumerate(SENTENCES)]
    batch = collate(items, [0, 1], plain.tokenizer)
    assert batch[2].tolist() == collate(items, [0, 1], nemo.tokenizer)[2].tolist()  # same token ids
    g_n, _, _ = nemo.decoder(targets=batch[2], target_length=batch[3])
    g_p, _, _ = plain.decoder(batch[2], batch[3])
    torch.testing.assert_close(g_p, g_n, atol=1e-5, rtol=1e-5)
    enc = torch.randn(2, 384, 9)
    # NeMo's joint returns log-probabilities on CPU, the plain joint raw logits (the loss normalises both)
    torch.testing.assert_close(
        plain.joint(enc, g_p).log_softmax(-1),
        nemo.joint(encoder_outputs=enc, decoder_outputs=g_n),
        atol=1e-4,
        rtol=1e-4,
    )
    loss_n, loss_p = batch_loss(nemo, *batch), batch_loss(plain, *batch)
    assert loss_p.item() > 0
    assert loss_p.item() == pytest.approx(loss_n.item(), rel=1e-4)


@torch.inference_mode()
def test_greedy_transcripts_match_nemo(models: tuple, audio: list[torch.Tensor]) -> None:
    nemo, plain = models
    x, n = _batch(audio)
    texts = []
    for model in (nemo, plain):
        mel, mel_len = model.preprocessor(input_signal=x, length=n)
        enc, enc_len = model.encoder.forward(audio_signal=mel, length=mel_len)
        hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len)
        texts.append([h.text for h in hyps])
    assert texts[0] == texts[1]
    assert "weather" in texts[1][0]  # the model does recognise the sentence (not two empty outputs)


def test_trained_plain_weights_load_into_the_nemo_model(models: tuple, tmp_path: Path) -> None:
    nemo, plain = models
    state = {k: v.clone() for k, v in plain.state_dict().items()}
    state["joint.enc.bias"] += 0.5  # as if trained
    paths = save_shards(state, tmp_path, max_bytes=4 * 2**20)
    assert len(paths) > 2  # split under the byte limit
    assert all(p.stat().st_size < 4 * 2**20 + 2**16 for p in paths)
    back = load_shards(paths)
    assert back.keys() == state.keys()
    fresh = load_model(MODEL)
    fresh.load_state_dict(back, strict=True)
    torch.testing.assert_close(fresh.joint.enc.bias, plain.joint.enc.bias + 0.5)


def test_word_error_rate() -> None:
    assert word_error_rate(["a b c"], ["a b c"]) == 0.0
    assert word_error_rate(["a x c d"], ["a b c"]) == pytest.approx(2 / 3)  # one substitution, one insertion
    assert word_error_rate(["", "a b"], ["a b", "a b"]) == pytest.approx(2 / 4)
    assert np.isclose(word_error_rate(["The cat."], ["the cat."]), 0.5)  # cased, as NeMo's


def test_batched_whisper_frames_equal_one_at_a_time(models: tuple, audio: list[torch.Tensor]) -> None:
    _, plain = models
    batched = whisper_frames_batch(plain, audio)  # two lengths, padded into one batch
    for wav, frames in zip(audio, batched, strict=True):
        alone = whisper_frames(plain, wav)
        assert frames.shape == alone.shape
        torch.testing.assert_close(frames, alone, atol=2e-3, rtol=2e-3)


def test_learning_rate_decays_over_the_time_budget() -> None:
    from training.train import lr_at

    assert lr_at(0, 1.0, 10, 1000) == pytest.approx(0.1)  # warm-up
    assert lr_at(500, 1.0, 10, 1000) > 0.5  # half the steps: still high by steps alone
    assert lr_at(500, 1.0, 10, 1000, time_frac=1.0) == pytest.approx(0.05)  # the time budget is spent
    assert lr_at(500, 1.0, 10, 1000, time_frac=0.5) == pytest.approx(0.05 + 0.95 * 0.5)


def test_synthesis_mix_of_some_training_engines() -> None:
    jobs = make_jobs([f"Sentence {i}." for i in range(400)], 400, "espeak,flite", seed=1, prefix="g")
    engines = [j[2] for j in jobs]
    assert set(engines) == {"espeak", "flite"}  # no piper: a device machine has only these two
    assert 0.55 < engines.count("espeak") / len(engines) < 0.80  # the training mix's 0.55 : 0.27
    with pytest.raises(ValueError, match="unknown voices 'festvial'"):
        make_jobs(["A."], 1, "festvial", seed=1, prefix="g")


def _write_manifest(audio: list[torch.Tensor], folder: Path) -> Path:
    import soundfile

    lines = []
    for i, (wav, text) in enumerate(zip(audio, SENTENCES, strict=True)):
        path = folder / f"u{i}.wav"
        soundfile.write(path, wav.numpy(), 16000, subtype="PCM_16")
        lines.append(json.dumps({"audio_filepath": str(path), "duration": wav.numel() / 16000, "text": text}))
    manifest = folder / "manifest.json"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def test_pack_audio_keeps_16k_speech_within_the_budget(audio: list[torch.Tensor], tmp_path: Path) -> None:
    import soundfile

    from training.pack_audio import pack

    manifest = _write_manifest(audio, tmp_path)
    everything = pack(manifest, tmp_path / "all", "opus")
    sizes = [Path(e["audio_filepath"]).stat().st_size for e in everything]
    wav_bytes = sum(a.numel() * 2 for a in audio)
    assert len(everything) == 2 and sum(sizes) < wav_bytes / 10  # ~12 kbit/s against 256 kbit/s PCM
    for entry, wav in zip(everything, audio, strict=True):
        decoded, sr = soundfile.read(entry["audio_filepath"], dtype="float32")
        assert sr == 16000 and len(decoded) == wav.numel()
    budget = (sizes[0] + sizes[1] // 2) / 1e6  # room for the first file only
    kept = pack(manifest, tmp_path / "some", "opus", budget_mb=budget)
    assert [e["text"] for e in kept] == SENTENCES[:1]
    assert sorted(p.name for p in (tmp_path / "some").iterdir()) == ["manifest.json", "u0.ogg"]
    listed = [json.loads(line) for line in (tmp_path / "some" / "manifest.json").read_text().splitlines()]
    assert listed == kept
    flac = pack(manifest, tmp_path / "dev", "flac", limit=1)
    lossless, _ = soundfile.read(flac[0]["audio_filepath"], dtype="int16")
    original, _ = soundfile.read(manifest.parent / "u0.wav", dtype="int16")
    assert len(flac) == 1 and np.array_equal(lossless, original)


def _without_nemo(tmp_path: Path) -> dict[str, str]:
    """Environment in which ``import nemo`` fails, as on a device machine."""
    blocker = tmp_path / "nonemo" / "nemo"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('NeMo is not installed here')\n")
    return {**os.environ, "PYTHONPATH": f"{blocker.parent}{os.pathsep}{REPO_ROOT}"}


def _run(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_encode_train_and_return_weights_without_nemo(
    models: tuple, audio: list[torch.Tensor], tmp_path: Path
) -> None:
    nemo, _ = models
    env = _without_nemo(tmp_path)
    import soundfile

    from training.pack_audio import pack

    manifest = _write_manifest(audio, tmp_path)
    pack(manifest, tmp_path / "opus", "opus")  # speech carried as Ogg Opus (gpu_pack.sh), encoded there too
    cache, opus_cache = tmp_path / "cache.pt", tmp_path / "opus.pt"
    for source, out in ((manifest, cache), (tmp_path / "opus" / "manifest.json", opus_cache)):
        _run(
            [
                "-m",
                "training.features",
                "--plain",
                "--batch",
                "2",
                "--model",
                str(MODEL),
                "--manifest",
                str(source),
                "--out",
                str(out),
            ],
            env,
        )
    items = torch.load(cache)
    assert [it["text"] for it in items] == SENTENCES[::-1]  # batched by duration: the shorter first
    pcm = torch.from_numpy(soundfile.read(tmp_path / "u0.wav", dtype="float32")[0])
    torch.testing.assert_close(items[1]["feats"].float(), whisper_frames(nemo, pcm), atol=5e-3, rtol=5e-3)

    for i in (1, 2):  # gpu_train.sh repeats the carried speech per epoch through links to its cache
        (tmp_path / f"opus_rep{i}.pt").symlink_to(opus_cache.name)
    work = tmp_path / "run"
    stdout = _run(
        [
            "-m",
            "training.train",
            "--plain",
            "--init",
            str(MODEL),
            "--train",
            str(cache),
            str(tmp_path / "opus_rep*.pt"),
            "--eval",
            str(cache),
            str(opus_cache),
            "--work",
            str(work),
            "--steps",
            "3",
            "--warmup",
            "1",
            "--lr",
            "1e-4",
            "--eval-every",
            "3",
            "--eval-first",
            "--batch-frames",
            "2000",
            "--time-schedule",
            "--minutes",
            "5",
        ],
        env,
    )
    log = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    assert "train 6 utterances" in stdout  # 2 + 2 x 2 carried
    assert log[0]["step"] == 0 and 0.0 <= log[0]["wer_cache"] < 0.5  # the shipped model knows these
    assert 0.0 <= log[0]["wer_opus"] < 0.5  # ... and still after Opus at ~12 kbit/s
    assert log[-1]["step"] == 3 and "wer_cache" in log[-1]
    out = tmp_path / "out"
    _run(["-m", "training.plain", "shards", "--ckpt", str(work / "ckpt.pt"), "--out", str(out)], env)
    shards = sorted(out.glob("weights_*.pt"))
    assert shards and all(p.stat().st_size < 16 * 2**20 for p in shards)

    # back on a machine with NeMo: join and export; the trained weights are in the exported model
    joined, exported = tmp_path / "ckpt_compact.pt", tmp_path / "model.nemo"
    _run(
        ["-m", "training.plain", "join", "--shards", *map(str, shards), "--out", str(joined)],
        dict(os.environ),
    )
    _run(
        [
            "-m",
            "training.export",
            "--init",
            str(MODEL),
            "--ckpt",
            str(joined),
            "--half",
            "--int8",
            "--out",
            str(exported),
        ],
        dict(os.environ),
    )
    trained = torch.load(joined)["model"]
    assert torch.load(joined)["step"] == 3
    assert not torch.equal(trained["joint.enc.weight"].half(), nemo.joint.enc.weight.half())  # it did train
    back = load_model(exported)
    torch.testing.assert_close(back.joint.enc.weight, trained["joint.enc.weight"].half().float())
