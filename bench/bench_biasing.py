"""Graph size and compile time for 10..20,000 generated terms (issue 3's benchmark; a script, not a test).

    .venv/bin/python bench/bench_biasing.py [--tokenizer MODEL.model] [--sizes 10,100,1000,10000,20000]

Compares our case-insensitive graph with (a) NeMo 3.0.0's own case-sensitive tree of the same list and
(b) NeMo's tree of the naive expansion into lower/UPPER/Title copies. Without --tokenizer, a 1,024-piece
SentencePiece BPE is trained on generated text first (a few seconds; no downloads).
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import sentencepiece as spm
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from biasing.compile import build_graph  # noqa: E402
from biasing.graph import GraphMode, GraphParams  # noqa: E402
from biasing.nemo.compat import to_nemo_model  # noqa: E402

ONSETS = "b c d f g h j k l m n p qu r s t v w x z br cl dr fl gr pl pr st tr sh ch th".split()
VOWELS = "a e i o u y ai ea io ou".split()
DRUG_SUFFIXES = "mab zolid pril sartan statin olol azole cillin mycin vir tinib parin dronate".split()
COMPANY_SUFFIXES = "Group Systems Holdings Labs Inc Partners Analytics Logistics Bank Energy".split()
FILLER = "the patient and meeting quarterly review with about earnings of new from call team".split()


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables))


def generate_terms(count: int, seed: int = 0) -> list[str]:
    """Unique drug-like (lower case) and company-like (Title Case, 1-3 words) names."""
    rng = random.Random(seed)
    terms: dict[str, None] = {}
    while len(terms) < count:
        if rng.random() < 0.5:
            name = _word(rng, rng.randint(1, 3)) + rng.choice(DRUG_SUFFIXES)
        else:
            words = [_word(rng, rng.randint(1, 3)).capitalize() for _ in range(rng.randint(1, 2))]
            name = " ".join([*words, rng.choice(COMPANY_SUFFIXES)])
        terms.setdefault(name)
    return list(terms)


def train_tokenizer(vocab_size: int = 1024) -> spm.SentencePieceProcessor:
    rng = random.Random(1)
    names = generate_terms(3000, seed=99)
    sentences = []
    for _ in range(6000):
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))] + [rng.choice(names)]
        rng.shuffle(words)
        text = " ".join(words)
        sentences.append(text.capitalize() if rng.random() < 0.5 else text)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def nemo_tree(sp: spm.SentencePieceProcessor, texts: list[str]):
    """NeMo 3.0.0's own builder (what BoostingTreeModelConfig/from_config does after tokenizing)."""
    from nemo.collections.asr.parts.context_biasing.boosting_graph_batched import GPUBoostingTreeModel
    from nemo.collections.asr.parts.context_biasing.context_graph_universal import ContextGraph

    graph = ContextGraph(context_score=1.0, depth_scaling=2.0)
    graph.build(token_ids=[sp.encode(t) for t in texts], phrases=texts, scores=[0.0] * len(texts))
    return GPUBoostingTreeModel.from_context_graph(graph, vocab_size=sp.get_piece_size(), use_triton=False)


def model_bytes(model: torch.nn.Module) -> int:
    return sum(t.nbytes for t in (*model.parameters(), *model.buffers()))


def timed(build: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = build()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", type=Path, help="SentencePiece .model (default: train one here)")
    parser.add_argument("--sizes", default="10,100,1000,10000,20000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sp = spm.SentencePieceProcessor(model_file=str(args.tokenizer)) if args.tokenizer else train_tokenizer()
    source = args.tokenizer or "generated BPE"
    print(f"tokenizer: {source}, {sp.get_piece_size()} pieces; compile ms = median of {args.repeats}")
    columns = ["terms", "CI ms", "CI st", "CI arcs", "CI MB", "tree ms", "tree st", "tree arcs", "tree MB"]
    columns += ["3x ms", "3x st", "3x arcs", "3x MB", "st/tree", "st/3x", "MB/3x"]
    header = " ".join(f"{c:>9}" for c in columns)
    print(header)
    print("-" * len(header))
    for size in (int(s) for s in args.sizes.split(",")):
        terms = generate_terms(size)
        naive = [variant for t in terms for variant in dict.fromkeys([t.lower(), t.upper(), t.title()])]
        ci_ms, graph = timed(lambda terms=terms: build_graph(terms, sp, GraphParams()), args.repeats)
        tree_repeats = args.repeats if size <= 1000 else 1
        tree_ms, tree = timed(lambda terms=terms: nemo_tree(sp, terms), tree_repeats)
        naive_ms, naive_tree = timed(lambda naive=naive: nemo_tree(sp, naive), tree_repeats)
        ci_mb = model_bytes(to_nemo_model(graph)) / 1e6
        tree_mb, naive_mb = model_bytes(tree) / 1e6, model_bytes(naive_tree) / 1e6
        row = [size, f"{ci_ms:.1f}", graph.num_states, graph.num_arcs, f"{ci_mb:.2f}"]
        row += [f"{tree_ms:.1f}", tree.num_states, tree.num_arcs, f"{tree_mb:.2f}"]
        row += [f"{naive_ms:.1f}", naive_tree.num_states, naive_tree.num_arcs, f"{naive_mb:.2f}"]
        row += [
            f"{graph.num_states / tree.num_states:.2f}",
            f"{graph.num_states / naive_tree.num_states:.2f}",
        ]
        row += [f"{ci_mb / naive_mb:.2f}"]
        print(" ".join(f"{value:>9}" for value in row))
    ours_tree_ms, _ = timed(
        lambda: build_graph(generate_terms(1000), sp, GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE)),
        args.repeats,
    )
    print(f"our CASE_SENSITIVE_TREE builder, 1000 terms: {ours_tree_ms:.1f} ms")
    print("MB = bytes of the NeMo model's tensors (arcs padded by the vocabulary, as NeMo stores them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
