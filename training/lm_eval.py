"""Greedy (and optionally beam) RNNT WER on the held-out caches with and without n-gram LM shallow fusion.

Decodes the cached Whisper encoder outputs exactly as ``training/train.py``'s ``evaluate`` does (same
batching, cased and punctuated WER), once with the plain ``greedy_batch`` decoder and once per
``--alphas`` value with NeMo's NGPU-LM (``greedy.ngram_lm_model`` / ``greedy.ngram_lm_alpha``; the LM
score is added to the non-blank log-probs, the blank / non-blank decision stays the ASR model's).
``--beam`` adds ``malsd_batch`` beam search (with paired greedy runs if subset) for ``--beam-alphas``
(0 = beam without LM) with the ``--beam-lm`` LMs, optionally on the first ``--beam-limit`` utterances only.

Usage:
    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python -m training.lm_eval \
        --init models/captions-embedded.nemo [--ckpt training/work/run5/ckpt.pt] \
        --lm training/work/lm/tokens_4gram.nemo \
        --alphas 0.1 0.2 0.3 0.5 0.7 [--beam 4 --beam-alphas 0 0.2 0.3 0.5] \
        [--json training/work/lm/eval.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import time
from pathlib import Path

import torch
from nemo.collections.asr.metrics.wer import word_error_rate
from omegaconf import open_dict

import captions_model.nemo_encoder  # noqa: F401 - registers our _target_ prefixes with NeMo
from training.features import load_model
from training.train import decode_caches


def decode(model, items: list[dict], batch_frames: int = 6000) -> tuple[float, list[str]]:  # noqa: ANN001
    """WER and hypotheses (in batch order), batched as ``training.train.evaluate``."""
    model.eval()
    hyps, refs = decode_caches(model, items, batch_frames)
    return word_error_rate(hyps, refs), hyps


def set_decoding(model, base_cfg, strategy: str, lm: Path | None, alpha: float, beam: int = 4) -> None:  # noqa: ANN001
    cfg = copy.deepcopy(base_cfg)
    with open_dict(cfg):
        cfg.strategy = strategy
        cfg.greedy.max_symbols = 10
        cfg.greedy.loop_labels = True
        cfg.greedy.use_cuda_graph_decoder = False
        cfg.greedy.ngram_lm_model = None
        cfg.greedy.ngram_lm_alpha = 0.0
        if "beam" not in cfg or cfg.beam is None:
            cfg.beam = {}
        cfg.beam.beam_size = beam
        cfg.beam.max_symbols = 10
        cfg.beam.allow_cuda_graphs = False
        cfg.beam.return_best_hypothesis = True
        cfg.beam.ngram_lm_model = None
        cfg.beam.ngram_lm_alpha = 0.0
        sec = cfg.greedy if strategy.startswith("greedy") else cfg.beam
        if lm is not None and alpha > 0:
            sec.ngram_lm_model = str(lm)
            sec.ngram_lm_alpha = alpha
    model.change_decoding_strategy(cfg, verbose=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", type=Path, default=Path("training/work/init_top4.nemo"))
    ap.add_argument(
        "--ckpt", type=Path, default=None, help="training checkpoint to load (default: --init's own weights)"
    )
    ap.add_argument(
        "--eval",
        type=Path,
        nargs="+",
        default=[
            Path("training/work/cache/test_festival_full.pt"),
            Path("training/work/cache/test_trainvoices_full.pt"),
        ],
    )
    ap.add_argument("--lm", type=Path, nargs="+", default=[Path("training/work/lm/tokens_4gram.nemo")])
    ap.add_argument("--alphas", type=float, nargs="*", default=[0.1, 0.2, 0.3, 0.5, 0.7])
    ap.add_argument("--beam", type=int, default=0, help="malsd_batch beam size (0: no beam runs)")
    ap.add_argument("--beam-alphas", type=float, nargs="+", default=[0.0, 0.2, 0.3])
    ap.add_argument("--beam-lm", type=Path, nargs="+", default=None, help="beam LMs (default: first --lm)")
    ap.add_argument("--beam-limit", type=int, default=0, help="beam on the first N items per set (0: all)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("nemo_logger").setLevel(logging.ERROR)

    model = load_model(args.init)
    if args.ckpt is not None:
        ckpt = torch.load(args.ckpt, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        print(f"checkpoint {args.ckpt} step {ckpt.get('step')}", flush=True)
        del ckpt
    else:
        print(f"weights of {args.init}", flush=True)
    model.eval()
    base_cfg = copy.deepcopy(model.cfg.decoding)
    sets = {p.stem: torch.load(p) for p in args.eval}
    for name, items in sets.items():
        print(
            f"{name}: {len(items)} utterances, {sum(it['duration'] for it in items) / 60:.1f} min", flush=True
        )

    results = []

    def run(strategy: str, lm: Path | None, alpha: float, names: list[str], limit: int | None = None) -> None:
        t0 = time.time()
        set_decoding(model, base_cfg, strategy, lm, alpha, beam=args.beam or 4)
        t_load = time.time() - t0
        row = {"strategy": strategy, "lm": lm.name if lm is not None and alpha > 0 else None, "alpha": alpha}
        for name in names:
            items = sets[name][:limit] if limit else sets[name]
            t1 = time.time()
            wer, hyps = decode(model, items)
            row[name] = {"wer": wer, "n": len(items), "decode_s": time.time() - t1}
        row["lm_load_s"] = t_load
        results.append(row)
        cells = "  ".join(f"{n} {row[n]['wer'] * 100:6.2f}% ({row[n]['decode_s']:5.1f}s)" for n in names)
        print(f"{strategy:12s} {row['lm'] or '-':22s} alpha {alpha:4.2f}  {cells}", flush=True)

    names = list(sets)
    run("greedy_batch", None, 0.0, names)
    for lm in args.lm:
        for alpha in args.alphas:
            run("greedy_batch", lm, alpha, names)
    if args.beam:
        limit = args.beam_limit or None
        if limit:  # greedy references on the same subset
            run("greedy_batch", None, 0.0, names, limit)
        for lm in args.beam_lm or args.lm[:1]:
            for alpha in args.beam_alphas:
                if alpha > 0 and limit:
                    run("greedy_batch", lm, alpha, names, limit)
                run("malsd_batch", lm, alpha, names, limit)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
