"""Per-stream biasing throughput of the decoder alone, shaped like TurboBias 2.0's Table III (a script).

    .venv/bin/python bench/bench_registry.py [--streams 64,128] [--audio-s 30] [--terms 1000]
    python bench/bench_registry.py --device cuda --cuda-graphs on,off --streams 128,1,64,32 \
        --encoder-dim 1024 --pred-layers 2 --json rows.json      # Parakeet-TDT-0.6B's decoder shape

Decoder: NeMo 3.0.0's ``GreedyBatchedRNNTLabelLoopingComputer`` (prediction network 640, joint 640, 1,024
labels, random weights; ``--encoder-dim``/``--hidden``/``--pred-layers`` change the shape) on random
encoder output in 0.56 s chunks (7 frames), the decoding state carried across chunks, every stream with its
own generated list of ``--terms`` terms. Scenarios:
  no biasing        the same computer built without per-stream biasing
  shared graph      one list registered once, every stream points at it
  no cache          each stream compiles its list when it starts (build, NeMo model, add_model); removed
                    when it ends
  memory cache      lists precompiled in the registry's memory; registered when a stream starts, removed
                    when it ends
  registered        lists registered before the session starts (the registry's decoder registration)
The biased scenarios run with ``biasing.nemo.multi_model.SparseAdvanceMultiModel`` installed in the
computer (our drop-in PyTorch advance; on CUDA with Triton both use NeMo's Triton kernel); "registered, NeMo
advance" is the last one with NeMo's own multi-model.
RTFx = streams x audio seconds / wall seconds; ratios are to "no biasing", all measured in this run.
On CUDA, ``--cuda-graphs on`` lets NeMo capture the decoding loop in CUDA graphs (with per-stream biasing only
where the multi-model's Triton kernel is available: NeMo's own rule), ``off`` runs the PyTorch loop.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import sentencepiece as spm
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_biasing import generate_terms, train_tokenizer  # noqa: E402
from nemo.collections.asr.modules import RNNTDecoder, RNNTJoint  # noqa: E402
from nemo.collections.asr.parts.submodules.transducer_decoding.rnnt_label_looping import (  # noqa: E402
    GreedyBatchedRNNTLabelLoopingComputer,
)

from biasing.compile import build_graph  # noqa: E402
from biasing.nemo.compat import to_nemo_model  # noqa: E402
from biasing.nemo.multi_model import install_sparse_advance  # noqa: E402
from biasing.nemo.registry import BiasingRegistry  # noqa: E402

FRAMES_PER_CHUNK = 7  # 0.56 s at 80 ms per encoder frame
CHUNK_S = 0.56
SCENARIOS = (
    "no biasing",
    "shared graph",
    "no cache",
    "memory cache",
    "registered",
    "registered, NeMo advance",
)


def build_computers(
    vocab_size: int,
    device: str = "cpu",
    encoder_dim: int = 512,
    hidden: int = 640,
    pred_layers: int = 1,
    cuda_graphs: bool = False,
) -> tuple[GreedyBatchedRNNTLabelLoopingComputer, ...]:
    """Computers without biasing, with NeMo's multi-model and with ours, on one random decoder/joint."""
    torch.manual_seed(0)
    decoder = RNNTDecoder(
        prednet={"pred_hidden": hidden, "pred_rnn_layers": pred_layers, "dropout": 0.0},
        vocab_size=vocab_size,
        blank_as_pad=True,
    ).eval()
    joint = RNNTJoint(
        jointnet={
            "encoder_hidden": encoder_dim,
            "pred_hidden": hidden,
            "joint_hidden": hidden,
            "activation": "relu",
        },
        num_classes=vocab_size,
    ).eval()
    with torch.no_grad():  # favour blank: about 0.6 labels per frame (~8 per second), like speech
        joint.joint_net[-1].bias[vocab_size] += 1.1
    decoder.to(device)
    joint.to(device)
    common = {"decoder": decoder, "joint": joint, "blank_index": vocab_size, "max_symbols_per_step": 3}
    plain = GreedyBatchedRNNTLabelLoopingComputer(**common, allow_cuda_graphs=cuda_graphs)
    biased, sparse = (
        GreedyBatchedRNNTLabelLoopingComputer(
            **common, allow_cuda_graphs=cuda_graphs, enable_per_stream_biasing=True
        )
        for _ in range(2)
    )
    install_sparse_advance(sparse)
    with torch.inference_mode(False):  # the multi-models' buffers are edited in place by add/remove_model
        for computer in (biased, sparse):
            computer.biasing_multi_model.to(device)
    return plain, biased, sparse


def decode_session(
    computer: GreedyBatchedRNNTLabelLoopingComputer, chunks: list[torch.Tensor], ids: torch.Tensor | None
) -> int:
    """Decode every chunk of one session for the whole batch; returns the number of labels emitted."""
    state = None
    device = chunks[0].device
    emitted = torch.zeros((), dtype=torch.long, device=device)
    lengths = torch.full([chunks[0].shape[0]], FRAMES_PER_CHUNK, dtype=torch.long, device=device)
    ids = ids.to(device) if ids is not None else None
    with torch.inference_mode():
        for chunk in chunks:
            hyps, state = computer(chunk, lengths, prev_batched_state=state, multi_biasing_ids=ids)
            emitted += hyps.current_lengths.sum()
    return int(emitted)  # the one host-device sync of the session


def bench_batch(
    batch: int,
    sp: spm.SentencePieceProcessor,
    computers: tuple[GreedyBatchedRNNTLabelLoopingComputer, ...],
    steps: int,
    num_terms: int,
    repeats: int,
    encoder_dim: int = 512,
    device: str = "cpu",
) -> dict[str, tuple[float, int]]:
    """Wall seconds and labels emitted per scenario for ``batch`` streams."""
    plain, stock, fast = computers
    stock_multi, fast_multi = stock.biasing_multi_model, fast.biasing_multi_model
    lists = [generate_terms(num_terms, seed=1000 + i) for i in range(batch)]
    generator = torch.Generator().manual_seed(batch)
    chunks = [
        torch.randn(batch, FRAMES_PER_CHUNK, encoder_dim, generator=generator).to(device)
        for _ in range(steps)
    ]
    registry = BiasingRegistry(sp, memory_budget_bytes=2**34, idle_keep_registered=0)
    compiled = [registry.compile(terms) for terms in lists]  # untimed: fills the memory cache
    # Registered before the session (untimed), through a second registry so that the memory-cache scenario
    # still has to register its own copies.
    preregistered = BiasingRegistry(sp, memory_budget_bytes=2**34)
    fast_ids = torch.tensor([preregistered.acquire(c, fast_multi).model_id for c in compiled])
    stock_ids = torch.tensor([preregistered.acquire(c, stock_multi).model_id for c in compiled])
    shared_ids = torch.full([batch], int(fast_ids[0]))
    cuda = device.startswith("cuda")

    def measure(body: Callable[[], int]) -> tuple[float, int]:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        emitted = body()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start, emitted

    def no_cache() -> int:
        ids = [fast_multi.add_model(to_nemo_model(build_graph(terms, sp))) for terms in lists]
        emitted = decode_session(fast, chunks, torch.tensor(ids))
        for model_id in ids:
            fast_multi.remove_model(model_id)
        return emitted

    def memory_cache() -> int:
        leases = [registry.acquire(c.key, fast_multi) for c in compiled]
        emitted = decode_session(fast, chunks, torch.tensor([lease.model_id for lease in leases]))
        for lease in leases:
            registry.release(lease)
        return emitted

    scenarios: dict[str, Callable[[], int]] = {
        "no biasing": lambda: decode_session(plain, chunks, None),
        "shared graph": lambda: decode_session(fast, chunks, shared_ids),
        "no cache": no_cache,
        "memory cache": memory_cache,
        "registered": lambda: decode_session(fast, chunks, fast_ids),
        "registered, NeMo advance": lambda: decode_session(stock, chunks, stock_ids),
    }
    decode_session(plain, chunks[:2], None)  # warm-up (CUDA graphs are captured here)
    decode_session(stock, chunks[:2], stock_ids)
    decode_session(fast, chunks[:2], fast_ids)
    results: dict[str, tuple[float, int]] = {}
    order = list(scenarios)
    shuffler = random.Random(batch)
    for _ in range(repeats):  # rounds in shuffled order; the best round counts (a shared, noisy CPU)
        shuffler.shuffle(order)
        for name in order:
            wall, emitted = measure(scenarios[name])
            results[name] = min(results.get(name, (wall, emitted)), (wall, emitted))
    preregistered.drop_idle()
    registry.close()
    preregistered.close()
    return {name: results[name] for name in scenarios}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", default="64,128", help="comma-separated stream counts (in this order)")
    parser.add_argument("--audio-s", type=float, default=30.0, help="audio per stream in one session")
    parser.add_argument("--terms", type=int, default=1000, help="terms in each stream's list")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per scenario; the fastest counts")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--cuda-graphs", default="off", help="comma-separated on/off: NeMo's CUDA-graph decoding loop"
    )
    parser.add_argument("--encoder-dim", type=int, default=512, help="encoder output size (Parakeet: 1024)")
    parser.add_argument("--hidden", type=int, default=640, help="prediction network and joint size")
    parser.add_argument("--pred-layers", type=int, default=1, help="prediction LSTM layers (Parakeet: 2)")
    parser.add_argument("--vocab", type=int, default=1024, help="BPE pieces of the generated tokenizer")
    parser.add_argument("--budget-s", type=float, default=0.0, help="start no batch after this (0: no limit)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> list[dict]:
    """Every (CUDA graphs, stream count) of ``args``; rows of scenario results, printed as they come."""
    deadline = time.monotonic() + args.budget_s if args.budget_s else None
    if not args.device.startswith("cuda"):
        torch.set_num_threads(1)
    sp = train_tokenizer(args.vocab)
    steps = max(1, round(args.audio_s / CHUNK_S))
    print(
        f"{args.device}; {steps} chunks of {CHUNK_S} s per stream; {args.terms} terms per stream's list; "
        f"best of {args.repeats}",
        flush=True,
    )
    columns = ("wall s", "RTFx", "vs none", "labels")
    header = f"{'graphs':>6} {'streams':>7} {'scenario':<25} " + " ".join(f"{c:>8}" for c in columns)
    print(header)
    print("-" * len(header))
    rows: list[dict] = []
    for graphs in args.cuda_graphs.split(","):
        computers = build_computers(
            sp.get_piece_size(), args.device, args.encoder_dim, args.hidden, args.pred_layers, graphs == "on"
        )
        for batch in (int(s) for s in args.streams.split(",")):
            if deadline is not None and time.monotonic() > deadline:
                print(f"budget spent: graphs {graphs}, {batch} streams left out", flush=True)
                continue
            results = bench_batch(
                batch, sp, computers, steps, args.terms, args.repeats, args.encoder_dim, args.device
            )
            base_wall = results["no biasing"][0]
            for name, (wall, emitted) in results.items():
                rtfx = batch * steps * CHUNK_S / wall
                rows.append(
                    {
                        "cuda_graphs": graphs,
                        "streams": batch,
                        "scenario": name,
                        "wall_s": wall,
                        "rtfx": rtfx,
                        "vs_none": base_wall / wall,
                        "labels": emitted,
                    }
                )
                print(
                    f"{graphs:>6} {batch:>7} {name:<25} {wall:>8.2f} {rtfx:>8.1f} {base_wall / wall:>8.3f} "
                    f"{emitted:>8}",
                    flush=True,
                )
        del computers
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
