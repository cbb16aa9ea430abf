"""The embedded model's ``.nemo`` as plain PyTorch modules, for training where NeMo is not installed.

A device machine lent for a training run has PyTorch and SentencePiece but not NeMo, and nothing can be
installed there from a registry. ``load_plain`` reads a ``.nemo`` (a tar of ``model_config.yaml``,
``model_weights.ckpt`` and the tokenizer) and builds modules that compute what NeMo 3.0.0's do for this
model's configuration, with the same state-dict keys:

* ``preprocessor.featurizer``: ``AudioToMelSpectrogramPreprocessor`` (centred STFT, power, the stored mel
  filterbank, log with a clamp guard, no normalisation, dither or pre-emphasis);
* ``encoder``: ``captions_model.whisper_core.WhisperCore`` (the same class the NeMo module is built on);
* ``decoder``: ``RNNTDecoder`` with ``blank_as_pad`` (embedding, one LSTM layer, output dropout);
* ``joint``: ``RNNTJoint`` (two projections, ReLU, dropout, output layer; raw logits);
* ``decoding``: greedy batched RNNT decoding (``max_symbols`` labels per frame), NeMo's ``greedy_batch``.

So ``training/train.py`` and ``training/features.py`` run on either kind of model (``--plain``); a state
dict trained here loads into the NeMo model unchanged. ``tests/test_plain_model.py`` checks the outputs
against NeMo's on the shipped model.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
import yaml
from torch import Tensor, nn

from captions_model.whisper_core import WhisperCore


def read_nemo(path: Path) -> tuple[dict, dict[str, Tensor], bytes]:
    """``(config, state dict, tokenizer model bytes)`` of a ``.nemo`` file."""
    with tarfile.open(path) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        cfg = yaml.safe_load(tar.extractfile(members["model_config.yaml"]).read())
        state = torch.load(
            io.BytesIO(tar.extractfile(members["model_weights.ckpt"]).read()), map_location="cpu"
        )
        sp_name = cfg["tokenizer"]["model_path"].removeprefix("nemo:")
        sp_bytes = tar.extractfile(members[sp_name]).read()
    return cfg, state, sp_bytes


class LogMel(nn.Module):
    """NeMo's ``FilterbankFeatures`` for ``normalize: NA`` and no dither, pre-emphasis or padding."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        for key, want in (
            ("normalize", "NA"),
            ("dither", 0.0),
            ("preemph", None),
            ("pad_to", 0),
            ("log_zero_guard_type", "clamp"),
            ("frame_splicing", 1),
        ):
            if cfg.get(key, want) != want:
                raise ValueError(f"plain preprocessor supports {key}={want!r}, config has {cfg[key]!r}")
        self.n_fft = int(cfg["n_fft"])
        self.hop = round(cfg["window_stride"] * cfg["sample_rate"])
        self.win = round(cfg["window_size"] * cfg["sample_rate"])
        self.mag_power = float(cfg["mag_power"])
        self.guard = float(cfg["log_zero_guard_value"])
        n_bins = self.n_fft // 2 + 1
        self.register_buffer("window", torch.hann_window(self.win, periodic=False))
        self.register_buffer("fb", torch.zeros(1, int(cfg["features"]), n_bins))

    def forward(self, x: Tensor, seq_len: Tensor) -> tuple[Tensor, Tensor]:
        out_len = torch.div(seq_len + 2 * (self.n_fft // 2) - self.n_fft, self.hop, rounding_mode="floor")
        spec = torch.stft(
            x.float(),
            n_fft=self.n_fft,
            hop_length=self.hop,
            win_length=self.win,
            center=True,
            window=self.window,
            return_complex=True,
            pad_mode="constant",
        )
        power = torch.view_as_real(spec).pow(2).sum(-1).sqrt().pow(self.mag_power)
        mel = torch.log(torch.clamp(torch.matmul(self.fb, power), min=self.guard))
        valid = torch.arange(mel.shape[-1], device=mel.device)[None, :] < out_len[:, None]
        return mel.masked_fill(~valid[:, None, :], 0.0), out_len.long()


class Preprocessor(nn.Module):
    """Holds ``featurizer`` (the state-dict key NeMo uses) and takes NeMo's keyword arguments."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.featurizer = LogMel(cfg)

    def forward(self, input_signal: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        return self.featurizer(input_signal, length)


class _LSTM(nn.Module):
    """NeMo's ``LSTMDropout``: an LSTM (time-major) and dropout on its output."""

    def __init__(self, hidden: int, dropout: float) -> None:
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, num_layers=1)
        self.dropout = nn.Dropout(dropout) if dropout else None

    def forward(self, x: Tensor, h: tuple[Tensor, Tensor] | None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, h = self.lstm(x, h)
        return (self.dropout(x) if self.dropout is not None else x), h


class PredictionNet(nn.Module):
    """NeMo's ``RNNTDecoder`` (``blank_as_pad``, one LSTM layer, no normalisation)."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        pred = cfg["prednet"]
        if int(pred.get("pred_rnn_layers", 1)) != 1 or not cfg.get("blank_as_pad", False):
            raise ValueError("plain decoder supports one LSTM layer with blank_as_pad")
        self.blank_idx = int(cfg["vocab_size"])
        hidden = int(pred["pred_hidden"])
        self.prediction = nn.ModuleDict(
            {
                "embed": nn.Embedding(self.blank_idx + 1, hidden, padding_idx=self.blank_idx),
                "dec_rnn": _LSTM(hidden, float(pred.get("dropout", 0.0))),
            }
        )

    def predict(self, y: Tensor, state: tuple[Tensor, Tensor] | None, add_sos: bool) -> tuple[Tensor, tuple]:
        """Labels [B, U] -> outputs [B, U (+1), H] and the LSTM state; the start symbol is a zero vector."""
        emb = self.prediction["embed"](y)
        if add_sos:
            emb = torch.cat([torch.zeros_like(emb[:, :1]), emb], dim=1)
        g, state = self.prediction["dec_rnn"](emb.transpose(0, 1), state)
        return g.transpose(0, 1), state

    def forward(self, targets: Tensor, target_length: Tensor) -> tuple[Tensor, Tensor, tuple]:
        g, state = self.predict(targets.long(), None, add_sos=True)
        return g.transpose(1, 2), target_length, state


class Joint(nn.Module):
    """NeMo's ``RNNTJoint``: ``joint_net(enc(f) + pred(g))``; returns raw logits [B, T, U, V + 1]."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        net = cfg["jointnet"]
        if net.get("activation", "relu") != "relu":
            raise ValueError("plain joint supports relu")
        self.enc = nn.Linear(int(net["encoder_hidden"]), int(net["joint_hidden"]))
        self.pred = nn.Linear(int(net["pred_hidden"]), int(net["joint_hidden"]))
        layers: list[nn.Module] = [nn.ReLU()]
        if net.get("dropout"):
            layers.append(nn.Dropout(float(net["dropout"])))
        layers.append(nn.Linear(int(net["joint_hidden"]), int(cfg["num_classes"]) + 1))
        self.joint_net = nn.Sequential(*layers)

    def forward(self, encoder_outputs: Tensor, decoder_outputs: Tensor) -> Tensor:
        f = self.enc(encoder_outputs.transpose(1, 2))[:, :, None]
        g = self.pred(decoder_outputs.transpose(1, 2))[:, None]
        return self.joint_net(f + g)


class Tokenizer:
    """The model's SentencePiece BPE, with NeMo's ``text_to_ids`` / ``ids_to_text``."""

    def __init__(self, model_bytes: bytes) -> None:
        self.sp = spm.SentencePieceProcessor(model_proto=model_bytes)

    def text_to_ids(self, text: str) -> list[int]:
        return self.sp.encode_as_ids(text)

    def ids_to_text(self, ids: list[int]) -> str:
        return self.sp.decode_ids(ids)


@dataclass
class Hypothesis:
    text: str
    y_sequence: list[int]


class GreedyDecoding:
    """Greedy batched RNNT decoding: per frame, up to ``max_symbols`` labels until the joint picks blank."""

    def __init__(self, model: PlainRNNT, max_symbols: int) -> None:
        self.model = model
        self.max_symbols = max_symbols

    @torch.inference_mode()
    def rnnt_decoder_predictions_tensor(
        self, encoder_output: Tensor, encoded_lengths: Tensor
    ) -> list[Hypothesis]:
        dec, joint = self.model.decoder, self.model.joint
        blank = dec.blank_idx
        f = joint.enc(encoder_output.transpose(1, 2))  # [B, T, H]
        b = f.shape[0]
        last = torch.full((b, 1), blank, dtype=torch.long, device=f.device)
        g, state = dec.predict(last, None, add_sos=False)  # the start symbol: blank embeds to zeros
        tokens: list[list[int]] = [[] for _ in range(b)]
        for t in range(f.shape[1]):
            active = encoded_lengths > t
            for _ in range(self.max_symbols):
                k = joint.joint_net(f[:, t] + joint.pred(g[:, 0])).argmax(-1)
                emit = active & (k != blank)
                if not bool(emit.any()):
                    break
                g_new, state_new = dec.predict(k[:, None], state, add_sos=False)
                keep = emit[:, None, None]
                g = torch.where(keep, g_new, g)
                state = tuple(
                    torch.where(emit[None, :, None], n, o) for n, o in zip(state_new, state, strict=True)
                )
                for i in emit.nonzero()[:, 0].tolist():
                    tokens[i].append(int(k[i]))
                active = emit
        tok = self.model.tokenizer
        return [Hypothesis(tok.ids_to_text(ids), ids) for ids in tokens]


class PlainRNNT(nn.Module):
    """The embedded RNNT model without NeMo: ``preprocessor``, ``encoder``, ``decoder``, ``joint``."""

    def __init__(self, cfg: dict, sp_bytes: bytes) -> None:
        super().__init__()
        enc_cfg = {k: v for k, v in cfg["encoder"].items() if k != "_target_"}
        self.preprocessor = Preprocessor(cfg["preprocessor"])
        self.encoder = WhisperCore(**enc_cfg)
        self.decoder = PredictionNet(cfg["decoder"])
        self.joint = Joint(cfg["joint"])
        self.tokenizer = Tokenizer(sp_bytes)
        greedy = cfg.get("decoding", {}).get("greedy", {})
        self.decoding = GreedyDecoding(self, int(greedy.get("max_symbols", 10)))


def load_plain(path: Path, device: str = "cpu") -> PlainRNNT:
    """The ``.nemo`` at ``path`` as a ``PlainRNNT`` in eval mode (all keys must match)."""
    cfg, state, sp_bytes = read_nemo(path)
    model = PlainRNNT(cfg, sp_bytes)
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()


def word_error_rate(hyps: list[str], refs: list[str]) -> float:
    """Corpus WER on whitespace-split words (what NeMo's ``word_error_rate`` computes)."""
    errors = words = 0
    for hyp, ref in zip(hyps, refs, strict=True):
        h, r = hyp.split(), ref.split()
        row = list(range(len(h) + 1))
        for i, rw in enumerate(r, 1):
            prev, row[0] = row[0], i
            for j, hw in enumerate(h, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (rw != hw))
        errors += row[-1]
        words += len(r)
    return errors / max(1, words)


def save_shards(state: dict[str, Tensor], out_dir: Path, max_bytes: int = 15 * 2**20) -> list[Path]:
    """Write ``state`` as ``weights_<i>.pt`` files of at most ``max_bytes`` each (a device returns files of
    at most 16 MiB); ``load_shards`` joins them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, Tensor]] = [{}]
    size = 0
    for key, value in state.items():
        n = value.numel() * value.element_size()
        if shards[-1] and size + n > max_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = value.detach().cpu().clone()
        size += n
    paths = []
    for i, shard in enumerate(shards):
        paths.append(out_dir / f"weights_{i}.pt")
        torch.save(shard, paths[-1])
    return paths


def load_shards(paths: list[Path]) -> dict[str, Tensor]:
    state: dict[str, Tensor] = {}
    for path in sorted(paths):
        state.update(torch.load(path, map_location="cpu"))
    return state


def main() -> None:
    """``shards``: a training checkpoint's trained weights as files a device machine can return;
    ``join``: those files as a compact checkpoint for ``training.export``."""
    import argparse

    from training.checkpoint import is_frozen

    parser = argparse.ArgumentParser(description=main.__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    shards = sub.add_parser("shards")
    shards.add_argument("--ckpt", type=Path, required=True)
    shards.add_argument("--out", type=Path, required=True)
    join = sub.add_parser("join")
    join.add_argument("--shards", type=Path, nargs="+", required=True)
    join.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cmd == "shards":
        ckpt = torch.load(args.ckpt, map_location="cpu")
        trained = {k: v.float() for k, v in ckpt["model"].items() if not is_frozen(k)}
        trained["__meta__.step"] = torch.tensor(ckpt["step"])
        trained["__meta__.seen_s"] = torch.tensor(ckpt["seen_s"], dtype=torch.float64)
        paths = save_shards(trained, args.out)
        print(f"wrote {len(paths)} shards to {args.out}: {len(trained) - 2} tensors, step {ckpt['step']}")
    else:
        state = load_shards(args.shards)
        step, seen_s = int(state.pop("__meta__.step")), float(state.pop("__meta__.seen_s"))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": state, "step": step, "seen_s": seen_s, "compact": True}, args.out)
        print(f"wrote {args.out}: {len(state)} tensors, step {step}, {seen_s / 3600:.1f} audio-h")


if __name__ == "__main__":
    main()
