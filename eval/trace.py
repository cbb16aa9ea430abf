"""``python -m eval trace``: what each graph mode adds to a hypothesis's score, token by token.

For a term list and token sequences (the tokenizer's greedy encoding of a caption, or pieces given by hand),
every mode's graph is compiled as the engine compiles it and the sequence is advanced exactly as NeMo 3.0.0's
``GPUBoostingTreeModel.advance`` does (an arc if the state has one for the label, otherwise back off and
retry): per token the state reached, the arc's score, the refund paid by back-offs, and the running total.
A root summary says how many labels leave the root (the tokens that start a partial match) and what the
bare word-boundary piece earns. Scores are the graph's; the decoder multiplies them by ``alpha``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from biasing.compile import build_graph
from biasing.graph import BoostingGraph, GraphMode, GraphParams
from biasing.terms import Term
from biasing.tokenizer import WORD_BOUNDARY, TokenizerAdapter, as_tokenizer, fold

MODES = ("lower", "cased", "insensitive")


@dataclass(frozen=True)
class Step:
    """One token advanced through a graph: ``refund`` is the sum of back-off weights paid before the arc."""

    piece: str
    state_text: str
    arc: float
    refund: float

    @property
    def added(self) -> float:
        return self.arc + self.refund


def state_texts(graph: BoostingGraph, adapter: TokenizerAdapter) -> list[str]:
    """The text each state stands for (folded for the variative graph), rebuilt from the arcs: a state's
    parent has a lower id, so one pass in id order suffices."""
    texts = [""] * graph.num_states
    known = np.zeros(graph.num_states, dtype=bool)
    known[0] = True
    variative = graph.mode is not GraphMode.CASE_SENSITIVE_TREE
    depth = graph.state_order.astype(np.int64) - 1
    for state in range(graph.num_states):
        for label, (to, _) in graph.arcs_of(state).items():
            if to == 0 or known[to]:
                continue
            surface = fold(adapter.surfaces[label]) if variative else adapter.surfaces[label]
            if state == 0:
                texts[to] = surface[len(surface) - int(depth[to]) :] if variative else surface
            elif known[state]:
                texts[to] = texts[state] + surface
            else:
                continue
            known[to] = True
    return texts


def advance(graph: BoostingGraph, state: int, label: int) -> tuple[int, float, float]:
    """NeMo's advance for one label: (next state, arc weight, refund paid by back-offs)."""
    refund = 0.0
    while True:
        arcs = graph.arcs_of(state)
        if label in arcs:
            to, weight = arcs[label]
            return to, weight, refund
        refund += float(graph.backoff_weight[state])
        state = int(graph.backoff_to[state])


def trace(graph: BoostingGraph, adapter: TokenizerAdapter, labels: Sequence[int]) -> list[Step]:
    """Advance ``labels`` from the start state; one ``Step`` per label."""
    texts = state_texts(graph, adapter)
    state, steps = 0, []
    for label in labels:
        state, arc, refund = advance(graph, state, label)
        steps.append(Step(adapter.surfaces[label], texts[state], arc, refund))
    return steps


def root_summary(graph: BoostingGraph, adapter: TokenizerAdapter) -> str:
    """How many labels start a partial match at the root, their largest and mean first-token score, and the
    bare word-boundary piece's."""
    arcs = graph.arcs_of(0)
    entering = {label: weight for label, (to, weight) in arcs.items() if to != 0}
    boundary = [label for label, surface in enumerate(adapter.surfaces) if surface == WORD_BOUNDARY]
    bare = f"{entering.get(boundary[0], 0.0):.2f}" if boundary else "n/a"
    weights = np.asarray(list(entering.values()) or [0.0])
    top = sorted(entering.items(), key=lambda item: -item[1])[:8]
    strongest = ", ".join(f"`{adapter.surfaces[label]}` {weight:.2f}" for label, weight in top)
    return (
        f"{graph.num_states} states, {graph.num_arcs} arcs; {len(entering)} labels enter the graph at the "
        f"root (max {weights.max():.2f}, mean {weights.mean():.2f}); bare '{WORD_BOUNDARY}' earns {bare}; "
        f"strongest: {strongest}"
    )


def mode_terms(terms: Sequence[str], mode: str) -> tuple[list[Term], GraphMode]:
    """The list each eval casing gives the engine: display casing for ``cased``, typed (lower) otherwise."""
    if mode == "cased":
        return [Term(t) for t in terms], GraphMode.CASE_SENSITIVE_TREE
    graph_mode = GraphMode.CASE_INSENSITIVE if mode == "insensitive" else GraphMode.CASE_SENSITIVE_TREE
    return [Term(t.lower()) for t in terms], graph_mode


def format_trace(steps: Sequence[Step], alpha: float) -> str:
    rows = ["| piece | state | arc | refund | added | total | x alpha |", "|---|---|---|---|---|---|---|"]
    total = 0.0
    for step in steps:
        total += step.added
        rows.append(
            f"| `{step.piece}` | `{step.state_text}` | {step.arc:+.2f} | {step.refund:+.2f} | "
            f"{step.added:+.2f} | {total:.2f} | {total * alpha:.2f} |"
        )
    return "\n".join(rows)


def load_adapter(model: Path) -> TokenizerAdapter:
    """The tokenizer of a ``.nemo`` model (read from the archive, no model weights loaded)."""
    import tarfile
    import tempfile

    import sentencepiece as spm

    with tarfile.open(model) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("tokenizer.model"))
        data = archive.extractfile(member)
        if data is None:
            raise ValueError(f"{model}: {member.name} is not a file")
        with tempfile.NamedTemporaryFile(suffix=".model") as handle:
            handle.write(data.read())
            handle.flush()
            processor = spm.SentencePieceProcessor(model_file=handle.name)
    return as_tokenizer(processor)


def sequences(adapter: TokenizerAdapter, texts: Sequence[str], pieces: Sequence[str]) -> list[list[int]]:
    """Label sequences: each text's greedy encoding, and each hand-written space-separated piece list."""
    out = [adapter.ids(text) for text in texts]
    index = {surface: label for label, surface in enumerate(adapter.surfaces) if surface}
    for line in pieces:
        missing = [p for p in line.split() if p not in index]
        if missing:
            raise SystemExit(f"not pieces of this tokenizer: {missing}")
        out.append([index[p] for p in line.split()])
    return out


def main(args: argparse.Namespace) -> int:
    adapter = load_adapter(args.model)
    terms = [t.strip() for t in args.terms.split(",") if t.strip()]
    labels = sequences(adapter, args.text or [], args.pieces or [])
    for mode in [m.strip() for m in args.modes.split(",")]:
        if mode not in MODES:
            raise SystemExit(f"--modes must be among {MODES}, got {mode!r}")
        items, graph_mode = mode_terms(terms, mode)
        graph = build_graph(items, adapter, GraphParams(mode=graph_mode, tau=args.tau))
        tau = f", tau {args.tau:g}" if graph_mode is GraphMode.CASE_INSENSITIVE else ""
        print(f"\n## {mode}{tau}: {', '.join(t.text for t in items)}\n\n{root_summary(graph, adapter)}")
        for sequence in labels:
            print()
            print(format_trace(trace(graph, adapter, sequence), args.alpha))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace`` subcommand."""
    t = sub.add_parser("trace", help="per-token biasing scores of each graph mode for token sequences")
    t.add_argument("--model", type=Path, default=Path("models/captions-embedded.nemo"), help="its tokenizer")
    t.add_argument("--terms", required=True, help="comma-separated terms in display casing")
    t.add_argument("--text", action="append", help="a caption, encoded greedily (repeatable)")
    t.add_argument("--pieces", action="append", help="space-separated pieces, e.g. '▁ V el c ade'")
    t.add_argument("--modes", default=",".join(MODES), help="lower,cased,insensitive")
    t.add_argument("--tau", type=float, default=0.5, help="the case-insensitive graph's spreading")
    t.add_argument("--alpha", type=float, default=3.0, help="decoder weight (last column only)")
    t.set_defaults(func=main)
