"""``python -m biasing compile PHRASES --tokenizer MODEL.model | --nemo MODEL.nemo [--dot out.dot]``.

Compiles a phrase file (one term per line; an optional weight after a tab) for a model's tokenizer and
prints states, arcs, bytes and compile time. Rejected terms are listed on stderr (exit status 2).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import sentencepiece as spm

from biasing.compile import build_graph
from biasing.dot import to_dot
from biasing.graph import GraphMode, GraphParams
from biasing.terms import Term, TermError, TermValidationError, normalize_terms


def _read_terms(path: Path) -> list[Term]:
    terms, errors = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        text, _, weight = line.partition("\t")
        try:
            terms.append(Term(text, float(weight) if weight.strip() else 1.0))
        except ValueError:
            errors.append(TermError(number, text, f"line {number + 1}: weight {weight!r} is not a number"))
    if errors:
        raise TermValidationError(errors)
    return terms


def load_tokenizer(tokenizer: Path | None, nemo: Path | None) -> spm.SentencePieceProcessor:
    """A SentencePiece model file, or the tokenizer inside a ``.nemo`` archive (the model is not loaded)."""
    if tokenizer is not None:
        return spm.SentencePieceProcessor(model_file=str(tokenizer))
    if nemo is None:
        raise SystemExit("give --tokenizer or --nemo")
    with tarfile.open(nemo) as archive:
        members = [m for m in archive.getmembers() if m.isfile() and m.name.endswith("tokenizer.model")]
        handle = archive.extractfile(members[0]) if members else None
        if handle is None:
            raise SystemExit(f"{nemo}: no SentencePiece tokenizer.model inside")
        return spm.SentencePieceProcessor(model_proto=handle.read())


def _write_dot(text: str, destination: Path) -> None:
    if destination.suffix == ".svg":
        dot = shutil.which("dot")
        if dot is None:
            raise SystemExit("rendering SVG needs Graphviz's `dot` program; write a .dot file instead")
        with tempfile.NamedTemporaryFile("w", suffix=".dot", delete=False) as source:
            source.write(text)
        subprocess.run([dot, "-Tsvg", source.name, "-o", str(destination)], check=True)  # noqa: S603
        Path(source.name).unlink()
    else:
        destination.write_text(text, encoding="utf-8")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m biasing", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser("compile", help="compile a phrase file and print the graph's size")
    compile_.add_argument("phrases", type=Path, help="UTF-8 file, one term per line (optional <TAB>weight)")
    source = compile_.add_mutually_exclusive_group(required=True)
    source.add_argument("--tokenizer", type=Path, help="SentencePiece .model file")
    source.add_argument("--nemo", type=Path, help=".nemo model archive (only its tokenizer is read)")
    compile_.add_argument(
        "--mode", choices=[m.value for m in GraphMode], default=GraphMode.CASE_INSENSITIVE.value
    )
    compile_.add_argument("--tau", type=float, default=GraphParams.tau)
    compile_.add_argument("--context-score", type=float, default=GraphParams.context_score)
    compile_.add_argument("--depth-scaling", type=float, default=GraphParams.depth_scaling)
    compile_.add_argument("--dot", type=Path, help="also render the graph (.dot text, or .svg with Graphviz)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sp = load_tokenizer(args.tokenizer, args.nemo)
    mode = GraphMode(args.mode)
    params = GraphParams(mode, args.tau, args.context_score, args.depth_scaling)
    try:
        terms = normalize_terms(
            _read_terms(args.phrases),
            case_insensitive=mode is not GraphMode.CASE_SENSITIVE_TREE,
            tokenizer=sp,
        )
        start = time.perf_counter()
        graph = build_graph(terms, sp, params)
        elapsed_ms = (time.perf_counter() - start) * 1000
    except TermValidationError as error:
        print(error, file=sys.stderr)
        return 2
    print(
        f"terms={len(terms)} states={graph.num_states} arcs={graph.num_arcs} bytes={graph.nbytes} "
        f"compile_ms={elapsed_ms:.1f} mode={mode.value}"
    )
    if args.dot is not None:
        _write_dot(to_dot(graph, sp), args.dot)
        print(f"wrote {args.dot}")
    return 0
