"""``python -m eval``: build the contextual test set, run the biasing sweep over a manifest, merge results,
trace what each graph mode scores token by token.

Examples::

    python -m eval make-set --out var/eval/set --seed 0 --n 120
    python -m eval run --manifest var/eval/set/manifest.json --model models/captions-embedded.nemo \
        --biasing none,local,global,full --casing lower,cased,insensitive --decoding greedy,beam \
        --chunk 1.12 --tau 0.5 --alpha 1.0 --out var/eval/run
    python -m eval trace --terms "Nuviridex Group,UvelOl" --text "with Nuviridex Group" --pieces "▁U vel O L"
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.engine.types import EngineConfig

DEFAULT_TRAIN_TEXT = Path("training/work/text/train.txt")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _words(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def make_set(args: argparse.Namespace) -> int:
    from eval.dataset import write_set
    from eval.generate import build_set, rare_words_in
    from eval.sources import load_pools, training_vocabulary

    train_text: Path | None = args.train_text
    if train_text is None and DEFAULT_TRAIN_TEXT.is_file():
        train_text = DEFAULT_TRAIN_TEXT
    vocabulary = training_vocabulary(train_text) if train_text is not None else set()
    pools = load_pools().without(vocabulary)
    context_set = build_set(args.n, args.seed, pools, tuple(_words(args.voices)))
    leaked = rare_words_in(context_set, vocabulary)
    if leaked:
        raise SystemExit(f"rare terms found in the training text: {leaked}")
    if args.dry_run:
        print(json.dumps(context_set.to_json(), indent=1))
        return 0
    manifest = write_set(context_set, args.out, train_text)
    audio_s = sum(json.loads(line)["duration"] for line in manifest.read_text().splitlines())
    print(
        f"{manifest}: {len(context_set.utterances)} utterances, {audio_s / 60:.1f} min of audio, "
        f"{len(context_set.terms)} terms, {len(context_set.lists)} lists "
        f"(training text checked: {train_text or 'none given'})"
    )
    return 0


def make_term_free(args: argparse.Namespace) -> int:
    from eval.sources import load_pools
    from eval.term_free import build_items, build_lists, write_term_free_set

    real = None if str(args.real) == "none" else args.real
    if real is not None and not real.is_file():
        raise SystemExit(f"{args.real} not found: build it with python -m training.real_data --out ...")
    items = build_items(args.meeting, args.general, args.seed, real)
    lists = build_lists(load_pools(), args.seed, [item.text for item in items])
    if args.dry_run:
        print(json.dumps({"items": [item.text for item in items], **lists}, indent=1))
        return 0
    manifest = write_term_free_set(args.out, items, lists, args.seed)
    entries = [json.loads(line) for line in manifest.read_text().splitlines()]
    words = sum(len(e["text"].split()) for e in entries)
    sizes = ", ".join(f"{name} {len(ids)}" for name, ids in lists["lists"].items())
    print(
        f"{manifest}: {len(entries)} utterances, {sum(e['duration'] for e in entries) / 60:.1f} min, "
        f"{words} words, no term spoken; lists: {sizes}"
    )
    return 0


def served_engine_config(args: argparse.Namespace) -> EngineConfig:
    """The service's engine configuration (``CAPTIONS_*`` settings) for ``args.model``, with the engine
    flags that were given replacing the served values."""
    from backend.config import Settings, engine_config
    from captions_model.paths import resolve_lm

    settings = Settings(model=str(args.model))
    flags = {
        "torch_threads": args.threads,
        "max_batch_streams": args.max_batch_streams,
        "max_wait_ms": args.max_wait_ms,
        "beam_size": args.beam_size,
        "left_context_s": args.left_context,
        "right_context_s": args.right_context,
        "lm_alpha": args.lm_alpha,
        "lm_token_bonus": args.lm_token_bonus,
        "final_pass": getattr(args, "final_pass", None),
        "final_pass_alpha": getattr(args, "final_pass_alpha", None),
        "final_pass_beam_size": getattr(args, "final_pass_beam", None),
        "biasing_evidence_margin": getattr(args, "evidence_margin", None),
        "final_pass_term_deficit": getattr(args, "term_deficit", None),
        "final_pass_arbitration": getattr(args, "arbitration", None),
        "final_pass_refine_partials_s": getattr(args, "refine_partials", None),
    }
    overrides = {name: value for name, value in flags.items() if value is not None}
    if args.lm is not None:
        overrides["lm_path"] = resolve_lm(str(args.model), args.lm)
    return engine_config(settings, vocabulary_cache_dir=None, **overrides)


def describe(base: EngineConfig, args: argparse.Namespace) -> str:
    """One line of the settings the sweep runs with (flags given, the service's for the rest)."""
    alpha = args.alpha if args.alpha is not None else f"{base.biasing_alpha:g} (service)"
    tau = args.tau if args.tau is not None else f"{base.biasing_tau:g} (service)"
    return (
        f"settings: beam {base.beam_size}, LM {base.lm_path or 'none'} (weight {base.lm_alpha:g}, "
        f"token bonus {base.lm_token_bonus:g}), biasing alpha {alpha}, tau {tau}, "
        f"context {base.left_context_s:g} s + {base.right_context_s:g} s, threads {base.torch_threads}, "
        f"second pass {base.final_pass} (beam {base.final_pass_beam_size}, alpha {base.final_pass_alpha:g}, "
        f"arbitration {base.final_pass_arbitration}, partials re-read every "
        f"{base.final_pass_refine_partials_s:g} s)"
    )


def run(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from eval.dataset import load_set
    from eval.report import plot, table, to_row, write_outputs
    from eval.runner import expand_configs, run_sweep

    base = served_engine_config(args)
    torch.set_num_threads(base.torch_threads)
    groups = set(_words(args.group)) if args.group else None
    eval_set = load_set(args.manifest, args.lists, args.limit, groups)
    configs = expand_configs(
        _words(args.biasing),
        _words(args.casing),
        _words(args.decoding),
        _floats(args.chunk),
        _floats(args.tau) if args.tau is not None else [base.biasing_tau],
        _floats(args.alpha) if args.alpha is not None else [base.biasing_alpha],
        _floats(args.weight) if args.weight is not None else [None],
        modes=eval_set.modes(),
    )
    audio_s = sum(item.duration_s for item in eval_set.items)
    print(f"{len(eval_set.items)} utterances ({audio_s / 60:.1f} min), {len(configs)} configurations")
    print(describe(base, args))
    started = time.monotonic()
    with tqdm(total=round(audio_s * len(configs), 1), unit="audio s", desc="decoding") as bar:

        def advance(seconds: float) -> None:  # manifest durations are rounded: never overshoot the total
            bar.update(min(seconds, bar.total - bar.n))

        outputs = asyncio.run(
            run_sweep(base, eval_set, configs, progress=advance, on_group=bar.set_postfix_str, live=args.live)
        )
    rows = [to_row(output, eval_set) for output in outputs]
    meta = {
        "manifest": str(args.manifest),
        "groups": sorted(groups) if groups else None,
        "model": str(args.model),
        "utterances": len(eval_set.items),
        "audio_s": audio_s,
        "threads": base.torch_threads,
        "max_batch_streams": base.max_batch_streams,
        "beam_size": base.beam_size,
        "left_context_s": base.left_context_s,
        "right_context_s": base.right_context_s,
        "lm_path": base.lm_path,
        "lm_alpha": base.lm_alpha,
        "lm_token_bonus": base.lm_token_bonus,
        "final_pass": base.final_pass,
        "final_pass_alpha": base.final_pass_alpha,
        "final_pass_beam_size": base.final_pass_beam_size,
        "final_pass_arbitration": base.final_pass_arbitration,
        "final_pass_refine_partials_s": base.final_pass_refine_partials_s,
        "live_streams": args.live,
        "wall_s": time.monotonic() - started,
        "argv": sys.argv[1:],
        "model_sha256": hashlib.sha256(args.model.read_bytes()).hexdigest(),
        "model_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.model.stat().st_mtime)),
    }
    meta["final_pass_outcomes"] = {o.config.name: dict(o.final_pass_outcomes) for o in outputs}
    write_outputs(rows, outputs, eval_set, args.out, meta)
    plot_path = args.plot or args.out / "wer_vs_f.png"
    plot(
        rows, plot_path, f"{Path(args.model).name}: {len(eval_set.items)} utterances, {audio_s / 60:.1f} min"
    )
    print(table(rows))
    for output in outputs:
        if output.final_pass_outcomes:
            decisions = ", ".join(f"{name} {n}" for name, n in output.final_pass_outcomes)
            print(f"second pass, {output.config.name}: {decisions}")
    print(f"wrote {args.out}/results.csv, results.json, hyps/ and {plot_path}")
    return 0


def report(args: argparse.Namespace) -> int:
    from eval.dataset import load_set
    from eval.report import Row, plot, table, with_shown_from_hyps

    eval_set = load_set(args.manifest) if args.manifest is not None else None
    rows = []
    for result_dir in args.results:
        payload = json.loads((result_dir / "results.json").read_text(encoding="utf-8"))
        found = [Row(**row) for row in payload["results"]]
        if eval_set is not None:  # F shown from the saved hypotheses
            found = [with_shown_from_hyps(row, result_dir, eval_set) for row in found]
        rows += found
    order = {mode: i for i, mode in enumerate(("none", "local", "global", "full"))}
    casing = {c: i for i, c in enumerate(("-", "lower", "cased", "insensitive"))}
    rows.sort(key=lambda r: (r.chunk_s, r.decoding != "greedy", order[r.biasing], casing[r.casing], r.config))
    print(table(rows))
    if args.plot is not None:
        plot(rows, args.plot, args.title)
        print(f"wrote {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``eval`` argument parser (also mountable as ``captions eval``)."""
    parser = argparse.ArgumentParser(
        prog="python -m eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_subcommands(parser.add_subparsers(dest="eval_command", required=True))
    return parser


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Add ``make-set`` and ``run`` to a subparsers object; each sets ``func``."""
    make = sub.add_parser("make-set", help="generate the contextual test set (text, lists, festival audio)")
    make.add_argument("--out", type=Path, required=True, help="output directory")
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--n", type=int, default=120, help="utterances (half earnings, half clinical)")
    make.add_argument(
        "--train-text",
        type=Path,
        default=None,
        help=f"model training text; terms with a word in it are excluded (default: "
        f"{DEFAULT_TRAIN_TEXT} if it exists)",
    )
    make.add_argument(
        "--voices",
        default="kal_diphone,cmu_us_slt_arctic_hts,ked_diphone",
        help="festival voices (held out: the bundled model never heard festival)",
    )
    make.add_argument("--dry-run", action="store_true", help="print the set as JSON; no audio")
    make.set_defaults(func=make_set)
    tf = sub.add_parser(
        "make-term-free", help="term-free speech (real + held-out festival) and realistic lists never spoken"
    )
    tf.add_argument("--out", type=Path, required=True, help="output directory")
    tf.add_argument("--seed", type=int, default=0)
    tf.add_argument("--meeting", type=int, default=90, help="earnings/clinical sentences, ordinary words")
    tf.add_argument("--general", type=int, default=90, help="held-out WordNet/fortune sentences")
    tf.add_argument(
        "--real",
        type=Path,
        default=Path("training/work/real/manifest.json"),
        help="real speech manifest (python -m training.real_data); 'none' to leave real speech out",
    )
    tf.add_argument("--dry-run", action="store_true", help="print the sentences and lists; no audio")
    tf.set_defaults(func=make_term_free)
    r = sub.add_parser("run", help="decode a manifest for every configuration and score it")
    r.add_argument("--manifest", type=Path, required=True)
    r.add_argument("--lists", type=Path, default=None, help="lists.json (default: next to the manifest)")
    r.add_argument("--model", type=Path, required=True, help=".nemo Transducer")
    r.add_argument(
        "--biasing",
        default="none,local,global,full",
        help="none, or the set's list modes: local,global,full (make-set), the list names (make-term-free)",
    )
    r.add_argument("--casing", default="lower,cased,insensitive", help="lower,cased,insensitive")
    r.add_argument("--decoding", default="greedy", help="greedy,beam")
    r.add_argument("--chunk", default="1.12", help="chunk seconds, e.g. 0.56,1.12")
    r.add_argument(
        "--tau", default=None, help="potential spreading of the case-insensitive graph (default: service's)"
    )
    r.add_argument("--alpha", default=None, help="biasing weight(s) (default: the service's)")
    r.add_argument(
        "--weight",
        default=None,
        help="term weight(s) given to every term of the lists, as a user sets them (default: none given)",
    )
    r.add_argument(
        "--live",
        type=int,
        default=0,
        help="stream N recordings at a time at the pace of speech, as live sessions do (0: all at once, as "
        "fast as the engine decodes); what the screen shows (wer_partial) depends on it",
    )
    r.add_argument("--limit", type=int, default=None, help="only the first N utterances")
    r.add_argument("--group", default=None, help="only these manifest groups, e.g. real (make-term-free)")
    # Every engine setting defaults to what the service runs with (CAPTIONS_* settings), so a run with
    # defaults measures what users get; each flag overrides one of them.
    r.add_argument("--threads", type=int, default=None, help="torch threads of the decode thread")
    r.add_argument("--max-batch-streams", type=int, default=None)
    r.add_argument("--max-wait-ms", type=float, default=None)
    r.add_argument("--beam-size", type=int, default=None, help="beams per stream")
    r.add_argument(
        "--lm",
        default=None,
        help="token n-gram LM for beam search: a path, none, or auto (the bundled LM with the bundled model)",
    )
    r.add_argument("--lm-alpha", type=float, default=None, help="LM weight in beam search")
    r.add_argument("--lm-token-bonus", type=float, default=None, help="per-token score with the LM")
    r.add_argument(
        "--final-pass", choices=("off", "decode"), default=None, help="second pass for finals (service's)"
    )
    r.add_argument("--final-pass-alpha", type=float, default=None, help="vocabulary weight, second pass")
    r.add_argument("--final-pass-beam", type=int, default=None, help="beams of the second pass")
    r.add_argument(
        "--arbitration",
        choices=("agreement", "confidence", "scored"),
        default=None,
        help="second pass: which reading stands where the two passes disagree (service's)",
    )
    r.add_argument(
        "--refine-partials",
        type=float,
        default=None,
        help="second pass: re-read the open utterance every this many seconds for the partial (0: off)",
    )
    r.add_argument(
        "--term-deficit",
        type=float,
        default=None,
        help="second pass: a term stays only within this many nats of the unboosted reading (service's)",
    )
    r.add_argument(
        "--evidence-margin",
        type=float,
        default=None,
        help="beam search boosts a label only within this many nats of the model's best label (service's)",
    )
    r.add_argument("--left-context", type=float, default=None, help="s re-encoded before each chunk")
    r.add_argument("--right-context", type=float, default=None, help="s of look-ahead")
    r.add_argument("--out", type=Path, default=Path("var/eval/run"), help="results directory")
    r.add_argument("--plot", type=Path, default=None, help="PNG path (default: OUT/wer_vs_f.png)")
    r.set_defaults(func=run)
    rep = sub.add_parser("report", help="one table (and plot) from several `run` result directories")
    rep.add_argument("results", type=Path, nargs="+", help="directories holding results.json")
    rep.add_argument("--plot", type=Path, default=None, help="PNG path")
    rep.add_argument("--title", default="WER vs keyword F-score", help="plot title")
    rep.add_argument(
        "--manifest", type=Path, default=None, help="the runs' manifest: recompute F shown from their hyps/"
    )
    rep.set_defaults(func=report)
    from eval.degrade import add_parser as add_degrade
    from eval.trace import add_parser as add_trace
    from eval.whisper_alone import add_parser as add_whisper_alone

    add_trace(sub)
    add_degrade(sub)
    add_whisper_alone(sub)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
