"""Where the engine and ``training/evaluate.py``'s buffered simulation disagree, utterance by utterance.

Both decode the same manifest at the same chunk size: the simulation encodes each ``left + chunk + right``
window of the real audio and decodes the concatenated chunk frames in one call; the engine streams the audio
as the server does (the last chunk zero-padded, NeMo's buffered pipeline, the beam carried across chunk
calls, end of utterance after ``--eou-ms`` of blank). Prints both WERs (cased, as ``training/evaluate.py``)
and the utterances whose WER differs most, and writes every pair to ``--out``.

``--calls-of N`` (beam only) also decodes the simulation's own frames in calls of N encoder frames, carrying
the beam state from call to call with NeMo's ``prev_batched_state`` (NeMo's streaming continuation; the
engine's RNNT beam now resumes each hypothesis from its own frame instead, which equals one call): it
separates what that continuation loses from what the engine's encoder windows change.

Usage::

    python -m training.engine_gap --manifest training/work/test_trainvoices/manifest_d150.json \
        --decoding beam --lm models/captions-embedded-lm.nemo --limit 80 --out training/work/gap.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path


def carried_beam_text(decoding, enc, calls_of: int, tokenizer) -> str:  # noqa: ANN001
    """Beam search over ``enc`` [1, D, T] in calls of ``calls_of`` frames, the state carried across calls;
    the best beam by length-normalised score, its labels joined through the calls' root pointers."""
    import torch

    computer = decoding.decoding.decoding_computer
    blank = computer._blank_index
    frames = enc.transpose(1, 2).contiguous()
    state, histories = None, [[] for _ in range(computer.beam_size)]
    for start in range(0, frames.shape[1], calls_of):
        part = frames[:, start : start + calls_of]
        hyps, state = computer(part, torch.tensor([part.shape[1]]), state)
        roots = hyps.flatten_().tolist()[0]
        lengths, labels = hyps.current_lengths_wb.tolist()[0], hyps.transcript_wb.tolist()[0]
        histories = [
            histories[roots[k]] + [x for x in labels[k][: lengths[k]] if x >= 0 and x != blank]
            for k in range(computer.beam_size)
        ]
    best = int(torch.argmax(state.scores[0] / (state.current_lengths_nb[0].to(state.scores.dtype) + 1)))
    return tokenizer.ids_to_text(histories[best])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=Path("models/captions-embedded.nemo"))
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--decoding", choices=["greedy", "beam"], default="greedy")
    parser.add_argument("--beam", type=int, default=8)
    parser.add_argument("--lm", type=Path, default=None, help="token LM for beam search (none: no LM)")
    parser.add_argument("--lm-alpha", type=float, default=0.7)
    parser.add_argument("--lm-token-bonus", type=float, default=0.0, help="engine only (0: NeMo's fusion)")
    parser.add_argument("--chunk", type=float, default=1.12)
    parser.add_argument("--eou-ms", type=int, default=800, help="engine end of utterance (large: never)")
    parser.add_argument("--calls-of", type=int, default=0, help="beam: also decode in calls of N frames")
    parser.add_argument("--show", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch
    from nemo.collections.asr.metrics.wer import word_error_rate

    from eval.dataset import read_16k
    from training.evaluate import beam_decoding, decode, encode_buffered
    from training.features import load_model
    from training.real_speech import Setting, transcribe

    torch.set_num_threads(1)
    entries = [json.loads(line) for line in args.manifest.read_text().splitlines() if line.strip()]
    entries = entries[: args.limit] if args.limit else entries
    wavs = [Path(e["audio_filepath"]) for e in entries]
    refs = [e["text"] for e in entries]
    model = load_model(args.model)
    decoding = model.decoding
    if args.decoding == "beam":
        decoding = beam_decoding(model, args.beam, args.lm, args.lm_alpha if args.lm else 0.0)
    simulated, carried = [], []
    for wav in wavs:
        with torch.inference_mode():
            enc, enc_len = encode_buffered(model, torch.from_numpy(read_16k(wav)), 2.0, args.chunk, 0.56)
            simulated.append(decode(decoding, enc, enc_len))
            if args.calls_of and args.decoding == "beam":
                carried.append(carried_beam_text(decoding, enc, args.calls_of, model.tokenizer))
    setting = Setting("greedy")
    if args.decoding == "beam":
        setting = Setting("beam", args.beam, args.lm_alpha if args.lm else 0.0, args.lm_token_bonus)
    texts = asyncio.run(
        transcribe(
            str(args.model),
            setting,
            wavs,
            args.chunk,
            lm=str(args.lm) if args.lm else "none",
            stop_history_eou_ms=args.eou_ms,
        )
    )
    streamed = [texts[wav.name] for wav in wavs]
    rows = [
        {
            "delta": word_error_rate([e], [r]) - word_error_rate([s], [r]),
            "ref": r,
            "simulation": s,
            "engine": e,
        }
        for r, s, e in zip(refs, simulated, streamed, strict=True)
    ]
    rows.sort(key=lambda row: -abs(row["delta"]))
    for row in rows[: args.show]:
        print(f"{row['delta']:+.2f}\n  R: {row['ref']}\n  S: {row['simulation']}\n  E: {row['engine']}")
    sim_wer, engine_wer = word_error_rate(simulated, refs) * 100, word_error_rate(streamed, refs) * 100
    differ = sum(row["simulation"] != row["engine"] for row in rows)
    print(
        f"{args.decoding} at {args.chunk} s, {len(refs)} utterances: simulation WER {sim_wer:.2f} %, "
        f"engine {engine_wer:.2f} %; {differ} transcripts differ"
    )
    if carried:
        carried_wer = word_error_rate(carried, refs) * 100
        print(f"simulation frames in calls of {args.calls_of}, beam carried over: {carried_wer:.2f} %")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
