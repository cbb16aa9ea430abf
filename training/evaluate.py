"""Greedy WER of a ``.nemo`` from audio: offline (whole utterance) and simulated buffered streaming.

Buffered streaming is simulated the way NeMo's ``BufferedRNNTPipeline`` runs this model: each step encodes
``left + chunk + right`` seconds, keeps the chunk's frames, and the RNNT greedy decoder continues from its
state (equivalent to decoding the concatenated chunk frames). Also transcribes any extra WAVs given with
``--wav`` (e.g. the real human speech shipped in the ``moonshine-voice`` wheel).

Usage::

    python -m training.evaluate --model models/captions-embedded.nemo \
        --manifest training/work/test_festival/manifest_t0.json --chunks 1.12 0.56 --left 2.0 --right 0.56
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import soundfile as sf
import torch
from nemo.collections.asr.metrics.wer import word_error_rate
from omegaconf import OmegaConf
from tqdm import tqdm

import captions_model.nemo_encoder  # noqa: F401 - registers our _target_ prefixes with NeMo
from eval.dataset import read_16k
from training.features import load_model, streamed_frames


@torch.inference_mode()
def encode_offline(model, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """Whole-utterance encoder output ([1, D, T], [1]) from a waveform [S]."""
    feats, feat_len = model.preprocessor(input_signal=audio[None], length=torch.tensor([audio.numel()]))
    return model.encoder(audio_signal=feats, length=feat_len)


@torch.inference_mode()
def encode_buffered(model, audio: torch.Tensor, left: float, chunk: float, right: float):  # noqa: ANN001, ANN201
    """Encoder output as the buffered pipeline produces it: chunk frames of left+chunk+right windows."""
    x = streamed_frames(model, audio, left, chunk, right)
    return model.encoder.head(x[None], torch.tensor([x.shape[0]]))


@torch.inference_mode()
def decode(decoding, enc: torch.Tensor, enc_len: torch.Tensor) -> str:  # noqa: ANN001
    return decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len)[0].text


def beam_decoding(model, beam_size: int, lm: Path | None = None, lm_alpha: float = 0.0):  # noqa: ANN001, ANN201
    """A separate batched beam-search (modified ALSD) decoder over the model's prediction net and joint,
    optionally with a token n-gram LM fused (NeMo's NGPU-LM; what the engine does in beam search)."""
    from nemo.collections.asr.parts.submodules.rnnt_decoding import RNNTBPEDecoding

    beam: dict = {"beam_size": beam_size, "allow_cuda_graphs": False}
    if lm is not None and lm_alpha > 0:
        beam |= {"ngram_lm_model": str(lm), "ngram_lm_alpha": lm_alpha}
    cfg = OmegaConf.create({"strategy": "malsd_batch", "beam": beam})
    return RNNTBPEDecoding(
        decoding_cfg=cfg, decoder=model.decoder, joint=model.joint, tokenizer=model.tokenizer
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, nargs="*", default=[])
    parser.add_argument("--chunks", type=float, nargs="*", default=[1.12, 0.56])
    parser.add_argument("--left", type=float, default=2.0)
    parser.add_argument("--right", type=float, default=0.56)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--beam", type=int, default=0, help="also decode with beam search of this width")
    parser.add_argument("--lm", type=Path, default=None, help="token n-gram LM fused into beam search")
    parser.add_argument("--lm-alpha", type=float, default=0.7)
    parser.add_argument("--wav", type=Path, nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=None, help="write results (JSON) here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.model)
    beam = beam_decoding(model, args.beam, args.lm, args.lm_alpha) if args.beam > 1 else None
    results: dict = {"model": str(args.model), "left_s": args.left, "right_s": args.right}
    if beam is not None and args.lm is not None:
        results |= {"lm": str(args.lm), "lm_alpha": args.lm_alpha}
    for manifest in args.manifest:
        entries = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
        entries = entries[: args.limit] if args.limit else entries
        modes = ["offline"] + [f"chunk_{c}" for c in args.chunks]
        if beam is not None:
            modes += [f"beam{args.beam}_{m}" for m in modes]
        hyps: dict[str, list[str]] = {m: [] for m in modes}
        t0, audio_s = time.time(), 0.0
        for e in tqdm(entries, desc=manifest.parent.name):
            wav = torch.from_numpy(sf.read(e["audio_filepath"], dtype="float32")[0])
            audio_s += e["duration"]
            encoded = {"offline": encode_offline(model, wav)}
            for c in args.chunks:
                encoded[f"chunk_{c}"] = encode_buffered(model, wav, args.left, c, args.right)
            for mode, (enc, enc_len) in encoded.items():
                hyps[mode].append(decode(model.decoding, enc, enc_len))
                if beam is not None:
                    hyps[f"beam{args.beam}_{mode}"].append(decode(beam, enc, enc_len))
        refs = [e["text"] for e in entries]
        res = {m: round(word_error_rate(h, refs), 4) for m, h in hyps.items()}
        res["lowercase_no_punct_offline"] = round(
            word_error_rate([_plain(h) for h in hyps["offline"]], [_plain(r) for r in refs]), 4
        )
        res["n"] = len(entries)
        res["rtf_all_modes"] = round((time.time() - t0) / audio_s, 3)
        families = [_family(e.get("voice", "")) for e in entries]
        for voice in sorted(set(families)):
            sel = [i for i, f in enumerate(families) if f == voice]
            res[f"offline[{voice}]"] = round(
                word_error_rate([hyps["offline"][i] for i in sel], [refs[i] for i in sel]), 4
            )
        res["examples"] = [
            {"ref": refs[i], "offline": hyps["offline"][i], **{m: hyps[m][i] for m in modes[1:]}}
            for i in range(min(4, len(refs)))
        ]
        results[manifest.parent.name] = res
        print(json.dumps({k: v for k, v in res.items() if k != "examples"}))
    for wav_path in args.wav:
        audio = read_16k(wav_path)
        enc, enc_len = encode_buffered(model, torch.from_numpy(audio), args.left, 1.12, args.right)
        text = decode(model.decoding, enc, enc_len)
        results[f"wav:{wav_path.name}"] = text
        print(f"{wav_path.name}: {text}")
        if beam is not None:
            text = decode(beam, enc, enc_len)
            results[f"wav_beam{args.beam}:{wav_path.name}"] = text
            print(f"{wav_path.name} (beam {args.beam}): {text}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


def _family(voice: str) -> str:
    """espeak styles are pooled ("espeak"); other voices keep their name ("flite:slt")."""
    return "espeak" if voice.startswith("espeak") else voice


def _plain(s: str) -> str:
    return " ".join("".join(ch for ch in s.lower() if ch.isalpha() or ch in " '").split())


if __name__ == "__main__":
    main()
