"""Engine throughput benchmark: RTFx (audio seconds decoded per wall second) for N concurrent streams.

Every stream pushes its chunks back to back (no real-time pacing), so the engine runs as fast as it can;
RTFx >= N means N streams keep up with real time. Each configuration runs ``--repeats`` times and the best
run is kept (the first run of a new batch size also warms up CUDA graphs and kernels). Configurations:
streams x chunk size x greedy/beam x biasing mode:
  none         no list
  registered   a distinct ``--terms``-term list per stream, registered before the streams start
  nocache      every stream compiles and registers a new list when it starts (inside the timed run) and
               releases it when it ends
On CUDA the peak GPU memory of each run above what the engine held before it is reported per stream, and
``--cuda-graphs on|off`` switches NeMo's CUDA-graph greedy decoder (beam search never uses CUDA graphs).

    python bench/bench_engine.py                       # tiny random TDT model (built in a temp dir)
    python bench/bench_engine.py --tiny-encoder cache_aware --streams 1,16,64 --repeats 1  # cache-aware one
    python bench/bench_engine.py --model models/captions-embedded.nemo --streams 1,8,32
    python bench/bench_engine.py --model m.nemo --device cuda --streams 128,1,64,32 --json rows.json

``--final-passes off,decode`` runs every configuration once per second-pass mode (one engine each) and prints
what the second pass for finals costs: RTFx with and without it and its decode-thread time per audio second.
Babble rarely ends an utterance on a real model; ``--audio speech`` streams sentences spoken by espeak-ng with
pauses between them, so every stream commits a final every few seconds, as in a meeting:

    python bench/bench_engine.py --model models/captions-embedded.nemo --audio speech --streams 1,8 \
        --chunks 1.12 --decodings beam --bias-modes none,registered --terms 200 --final-passes off,decode
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from backend.engine import Engine, EngineConfig, VocabularyHandle

# torch, NeMo and the engine are imported where they are used: the engine's vocabulary compiler is a spawned
# process, which imports this module again when it is the main script.

BIAS_MODES = ("none", "registered", "nocache")


@dataclass(frozen=True)
class Row:
    streams: int
    chunk_s: float
    decoding: str
    bias: str
    audio_s: float
    wall_s: float
    words: int = 0  # words in the finals (random models: a sanity check that decoding emits something)
    gpu_mb_per_stream: float | None = None
    cuda_graphs: str = "auto"
    final_pass: str = "off"
    finals: int = 0
    cpu_ms_per_audio_s: float | None = None  # decode-thread CPU time of the first pass per audio second
    process_cpu_ms_per_audio_s: float | None = None  # the whole process (both passes, every thread)

    @property
    def biased(self) -> bool:
        return self.bias != "none"

    @property
    def rtfx(self) -> float:
        return self.audio_s / self.wall_s

    def to_json(self) -> dict:
        return {**asdict(self), "rtfx": self.rtfx}


def babble(seed: int, seconds: float) -> np.ndarray:
    """Tones, noise and silences (random models emit varied text; real models mostly blanks)."""
    rng = np.random.default_rng(seed)
    total = round(seconds * 16000)
    segments, length = [], 0
    while length < total:
        size = int(rng.integers(1280, 6400))
        t = np.arange(size) / 16000
        segment = rng.uniform(0.05, 0.5) * np.sin(2 * np.pi * rng.uniform(100, 3000) * t)
        segments.append(segment + rng.uniform(0, 0.2) * rng.standard_normal(size))
        length += size
    return np.clip(np.concatenate(segments)[:total], -1, 1).astype(np.float32)


SENTENCES = (
    "The quarterly revenue grew by twelve percent compared with last year.",
    "Please send the updated forecast to the finance team before Friday.",
    "The patient will continue the current dose and return in two weeks.",
    "We expect the new product line to launch early next spring.",
    "Our operating margin improved because of lower shipping costs.",
    "Start the antibiotic tonight and check the blood pressure tomorrow.",
    "The board approved the budget for the new research center.",
    "Could you repeat the last question about the customer numbers?",
)


def speech(seed: int, seconds: float) -> np.ndarray:
    """Sentences spoken by espeak-ng with 1 s pauses (each ends an utterance), cut to ``seconds``."""
    from tests.support.speech import spoken

    pieces, total, index = [], 0, seed
    with tempfile.TemporaryDirectory() as work:
        while total < seconds * 16000:
            audio = spoken(SENTENCES[index % len(SENTENCES)], Path(work))
            pieces.append(audio)
            total += len(audio)
            index += 1
    return np.concatenate(pieces)[: round(seconds * 16000)].astype(np.float32)


def recordings(manifest: Path) -> Callable[[int, float], np.ndarray]:
    """A source of ``seconds`` of a manifest's recordings, one after another, starting at the ``seed``-th."""
    import soundfile as sf

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    waves = []
    for row in rows:
        path = Path(row["audio_filepath"])
        audio, rate = sf.read(path if path.is_absolute() else manifest.parent / path, dtype="float32")
        if rate != 16000 or audio.ndim != 1:
            raise ValueError(f"{path}: 16 kHz mono expected, got {rate} Hz, shape {audio.shape}")
        waves.append(np.concatenate([audio, np.zeros(16000, dtype=np.float32)]))  # a pause ends each

    def source(seed: int, seconds: float) -> np.ndarray:
        pieces, total, index = [], 0, seed
        while total < seconds * 16000:
            pieces.append(waves[index % len(waves)])
            total += len(pieces[-1])
            index += 1
        return np.concatenate(pieces)[: round(seconds * 16000)]

    return source


def audio_source(name: str) -> Callable[[int, float], np.ndarray]:
    if name == "speech":
        return speech
    if name == "babble":
        return babble
    if name.startswith("manifest:"):
        return recordings(Path(name.removeprefix("manifest:")))
    raise ValueError(f"--audio: babble, speech or manifest:PATH, got {name!r}")


def random_terms(count: int, seed: int) -> list[str]:
    """Distinct made-up one- or two-word lower-case terms."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    terms: set[str] = set()
    while len(terms) < count:
        words = [
            "".join(rng.choice(letters, size=int(rng.integers(4, 10))))
            for _ in range(int(rng.integers(1, 3)))
        ]
        terms.add(" ".join(words))
    return sorted(terms)


@contextmanager
def cuda_graphs_mode(mode: str):
    """``on``/``off``: force NeMo's CUDA-graph greedy decoder for engines started inside (``auto``: the
    engine's choice, on where CUDA is available)."""
    import backend.engine.decoder as decoder_module

    original = decoder_module.greedy_decoding_cfg
    if mode != "auto":

        def patched(*args, **kwargs) -> dict:
            cfg = original(*args, **kwargs)
            cfg["greedy"]["use_cuda_graph_decoder"] = mode == "on"
            return cfg

        decoder_module.greedy_decoding_cfg = patched
    try:
        yield
    finally:
        decoder_module.greedy_decoding_cfg = original


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


async def run_config(
    engine: Engine,
    streams: int,
    chunk_s: float,
    decoding: str,
    bias: str,
    handles: list[VocabularyHandle],
    audio: list[np.ndarray],
    terms: int,
    seed: int,
    cuda_graphs: str = "auto",
) -> Row:
    """One timed run of ``streams`` concurrent streams; ``seed`` makes the lists of a ``nocache`` run new."""
    import torch

    from backend.engine import StreamOptions

    samples = engine.chunk_samples(chunk_s)
    device = engine.config.device
    cuda = device.startswith("cuda")

    async def one(index: int) -> tuple[float, int, int]:
        own: VocabularyHandle | None = None
        vocabulary = None
        if bias == "registered":
            vocabulary = handles[index]
        elif bias == "nocache":
            own = vocabulary = await engine.load_vocabulary(random_terms(terms, seed=seed + index))
        stream = engine.open_stream(StreamOptions(chunk_s=chunk_s, decoding=decoding, vocabulary=vocabulary))  # type: ignore[arg-type]
        signal = audio[index % len(audio)]
        words = finals = 0
        for start in range(0, len(signal) - samples + 1, samples):
            result = await stream.push(signal[start : start + samples])
            words += sum(len(final.text.split()) for final in result.finals)
            finals += len(result.finals)
        result = await stream.finish()
        words += sum(len(final.text.split()) for final in result.finals)
        finals += len(result.finals)
        if own is not None:
            own.release()
        return result.audio_decoded_s, words, finals

    base = 0
    if cuda:
        _synchronize(device)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    cost = engine._loaded_decoder().decoding_cost
    before = cost.totals()[decoding]
    started, cpu_started = time.perf_counter(), time.process_time()
    done = await asyncio.gather(*(one(i) for i in range(streams)))
    _synchronize(device)
    wall_s = time.perf_counter() - started
    audio_s = float(sum(d for d, _, _ in done))
    process_ms = 1000.0 * (time.process_time() - cpu_started) / max(audio_s, 1e-9)
    after = cost.totals()[decoding]
    cpu_ms = 1000.0 * (after[1] - before[1]) / max(after[2] - before[2], 1e-9)
    per_stream_mb = (torch.cuda.max_memory_allocated() - base) / 2**20 / streams if cuda else None
    return Row(
        streams,
        chunk_s,
        decoding,
        bias,
        audio_s,
        wall_s,
        sum(w for _, w, _ in done),
        per_stream_mb,
        cuda_graphs,
        pass_label(engine.config),
        sum(f for _, _, f in done),
        cpu_ms,
        process_ms,
    )


def pass_label(config: EngineConfig) -> str:
    """``off``, or ``decode/<arbitration>[/re-read <s>]`` (``EngineConfig.final_pass_arbitration``,
    ``final_pass_refine_partials_s``)."""
    if config.final_pass == "off":
        return "off"
    refine = (
        f"/re-read {config.final_pass_refine_partials_s:g}s" if config.final_pass_refine_partials_s else ""
    )
    return f"{config.final_pass}/{config.final_pass_arbitration}{refine}"


def print_final_pass_table(rows: list[Row]) -> None:
    """RTFx without and with the second pass, and its decode-thread time per audio second."""
    off = {(r.streams, r.chunk_s, r.decoding, r.bias): r for r in rows if r.final_pass == "off"}
    on = [r for r in rows if r.final_pass != "off"]
    if not off or not on:
        return
    print()
    print(
        "| streams | chunk s | decoding | bias | 2nd pass | finals | RTFx, 2nd pass off | RTFx, on "
        "| on/off | 2nd pass ms per audio s | process CPU ms per audio s, off / on |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in sorted(on, key=lambda r: (r.streams, r.chunk_s, r.decoding, r.bias, r.final_pass)):
        base = off.get((row.streams, row.chunk_s, row.decoding, row.bias))
        if base is None:
            continue
        cost_ms = 1000.0 * (row.wall_s - base.wall_s * row.audio_s / base.audio_s) / row.audio_s
        print(
            f"| {row.streams} | {row.chunk_s} | {row.decoding} | {row.bias} | {row.final_pass} "
            f"| {row.finals} | {base.rtfx:.1f} | {row.rtfx:.1f} | {row.rtfx / base.rtfx:.2f} | {cost_ms:.1f} "
            f"| {base.process_cpu_ms_per_audio_s or 0:.0f} / {row.process_cpu_ms_per_audio_s or 0:.0f} |"
        )


def print_cpu_table(by_key: dict[tuple[int, float, str, str], Row], modes: list[str]) -> None:
    """The decode thread's CPU time per audio second (first pass: encoder and decoding) and its ratios; on a
    shared machine other processes stretch wall time (RTFx) but hardly CPU time."""
    print()
    header = (
        "| streams | chunk s | decoding | CPU ms/audio s no bias | "
        + "".join(f"{m} | {m}/no-bias | " for m in modes)
        + "beam/greedy CPU |"
    )
    print(header)
    print("|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|")
    for (streams, chunk_s, decoding, bias), row in sorted(by_key.items()):
        if bias != "none" or row.cpu_ms_per_audio_s is None:
            continue
        cells = [str(streams), str(chunk_s), decoding, f"{row.cpu_ms_per_audio_s:.2f}"]
        for mode in modes:
            other = by_key.get((streams, chunk_s, decoding, mode))
            cpu = other.cpu_ms_per_audio_s if other else None
            cells.append(f"{cpu:.2f}" if cpu is not None else "-")
            cells.append(f"{cpu / row.cpu_ms_per_audio_s:.3f}" if cpu is not None else "-")
        greedy = by_key.get((streams, chunk_s, "greedy", "none"))
        greedy_cpu = greedy.cpu_ms_per_audio_s if greedy else None
        ratio = decoding == "beam" and greedy_cpu
        cells.append(f"{row.cpu_ms_per_audio_s / greedy_cpu:.2f}x" if ratio and greedy_cpu else "-")
        print("| " + " | ".join(cells) + " |")


def print_table(rows: list[Row]) -> None:
    print_final_pass_table(rows)
    first_mode = rows[0].final_pass if rows else "off"
    rows = [r for r in rows if r.final_pass == first_mode]
    by_key = {(r.streams, r.chunk_s, r.decoding, r.bias): r for r in rows}
    modes = [m for m in BIAS_MODES if m != "none" and any(r.bias == m for r in rows)]
    print()
    header = (
        "| streams | chunk s | decoding | RTFx no bias | "
        + "".join(f"RTFx {m} | {m}/no-bias | " for m in modes)
        + "beam/greedy time | GPU MB/stream |"
    )
    print(header)
    print("|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|")
    for (streams, chunk_s, decoding, bias), row in sorted(by_key.items()):
        if bias != "none":
            continue
        cells = [str(streams), str(chunk_s), decoding, f"{row.rtfx:.1f}"]
        for mode in modes:
            bias_row = by_key.get((streams, chunk_s, decoding, mode))
            cells.append(f"{bias_row.rtfx:.1f}" if bias_row else "-")
            cells.append(f"{bias_row.rtfx / row.rtfx:.3f}" if bias_row else "-")
        greedy = by_key.get((streams, chunk_s, "greedy", "none"))
        cells.append(f"{row.wall_s / greedy.wall_s:.2f}x" if decoding == "beam" and greedy else "-")
        memory = [
            r.gpu_mb_per_stream for r in rows if r.gpu_mb_per_stream is not None and r.streams == streams
        ]
        cells.append(f"{max(memory):.1f}" if memory else "-")
        print("| " + " | ".join(cells) + " |")
    print_cpu_table(by_key, modes)
    print()
    for decoding in sorted({r.decoding for r in rows}):
        for chunk_s in sorted({r.chunk_s for r in rows}):
            live = [
                r.streams
                for r in rows
                if r.decoding == decoding and r.chunk_s == chunk_s and r.rtfx >= r.streams
            ]
            best = max(live, default=0)
            print(f"largest tested stream count in real time ({decoding}, {chunk_s} s): {best}")


async def run(args: argparse.Namespace) -> list[Row]:
    """Every configuration of ``args`` on one engine; configurations not started within ``--budget-s``
    (counted from the call) are left out."""
    import torch

    from backend.engine import EngineConfig
    from captions_model.paths import resolve_lm
    from tests.support.tiny_model import build_tiny_transducer

    deadline = time.monotonic() + args.budget_s if args.budget_s else None
    torch.set_num_threads(args.threads)
    model = args.model
    if model is None:
        work_dir = Path(tempfile.mkdtemp(prefix="bench-engine-"))
        model = str(build_tiny_transducer(work_dir, kind=args.tiny_kind, encoder=args.tiny_encoder))
    stream_counts = [int(n) for n in args.streams.split(",")]
    chunk_sizes = [float(c) for c in args.chunks.split(",")]
    decodings = args.decodings.split(",")
    modes = args.bias_modes.split(",")
    unknown = set(modes) - set(BIAS_MODES)
    if unknown:
        raise ValueError(f"unknown bias modes {sorted(unknown)}; known: {BIAS_MODES}")
    refines = [float(r) for r in args.refine_partials.split(",")]
    configs = [replace(EngineConfig(
        model=model,
        device=args.device,
        torch_threads=args.threads,
        max_batch_streams=max(stream_counts),
        max_wait_ms=args.max_wait_ms,
        beam_size=args.beam_size,
        allowed_chunk_s=tuple(chunk_sizes),
        max_live_streams=max(stream_counts),
        right_context_s=args.right_context,
        lm_path=resolve_lm(model, args.lm),
        lm_alpha=args.lm_alpha,
        int8_encoder=args.int8_encoder,
    ), final_pass=mode, final_pass_arbitration=arbitration, final_pass_refine_partials_s=refine)
        for mode in args.final_passes.split(",")
        for arbitration in (args.arbitrations.split(",") if mode != "off" else ["scored"])
        for refine in (refines if mode != "off" else [0.0])]  # fmt: skip
    rows: list[Row] = []
    for config in configs:
        rows += await run_engine(args, config, stream_counts, chunk_sizes, decodings, modes, deadline)
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in rows], indent=1), encoding="utf-8")
    return rows


async def run_engine(
    args: argparse.Namespace,
    config: EngineConfig,
    stream_counts: list[int],
    chunk_sizes: list[float],
    decodings: list[str],
    modes: list[str],
    deadline: float | None,
) -> list[Row]:
    """Every configuration on one engine built from ``config``."""
    from backend.engine import Engine

    with cuda_graphs_mode(args.cuda_graphs):
        engine = Engine(config)
        await engine.start()
    rows: list[Row] = []
    try:
        handles: list[VocabularyHandle] = []
        if "registered" in modes:
            started = time.perf_counter()
            handles = [
                await engine.load_vocabulary(random_terms(args.terms, seed=i))
                for i in range(max(stream_counts))
            ]
            print(
                f"registered {len(handles)} lists of {args.terms} terms in "
                f"{time.perf_counter() - started:.1f} s",
                flush=True,
            )
        source = audio_source(args.audio)
        audio = [source(seed, args.seconds) for seed in range(8)]
        nocache_seed = 1_000_000
        plan = [  # stream counts outermost, in the order given: a spent budget leaves out the last ones
            (streams, decoding, chunk_s, bias)
            for streams in stream_counts
            for decoding in decodings
            for chunk_s in chunk_sizes
            for bias in modes
        ]
        for streams, decoding, chunk_s, bias in plan:
            if deadline is not None and time.monotonic() > deadline:
                print(f"budget spent: {decoding} {chunk_s} s {streams} streams {bias} left out", flush=True)
                continue
            runs = []
            for _ in range(args.repeats):
                nocache_seed += 1000
                runs.append(
                    await run_config(
                        engine, streams, chunk_s, decoding, bias, handles, audio, args.terms, nocache_seed,
                        args.cuda_graphs,
                    )
                )  # fmt: skip
            row = max(runs, key=lambda r: r.rtfx)  # the least disturbed (or warmed-up) run
            rows.append(row)
            memory = f"  {row.gpu_mb_per_stream:7.1f} MB/stream" if row.gpu_mb_per_stream else ""
            print(
                f"{decoding:6s} chunk {chunk_s:.2f} s  streams {streams:3d}  {bias:10s}  "
                f"2nd pass {pass_label(config):15s}  RTFx {row.rtfx:8.1f}  words {row.words:5d}  "
                f"finals {row.finals:4d}{memory}",
                flush=True,
            )
        for handle in handles:
            handle.release()
    finally:
        await engine.stop()
        del engine
    return rows


async def main(args: argparse.Namespace) -> None:
    print_table(await run(args))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help=".nemo path or pretrained name (default: tiny random)")
    parser.add_argument("--tiny-kind", default="tdt", choices=["rnnt", "tdt"], help="random model kind")
    parser.add_argument(
        "--tiny-encoder",
        default="conformer",
        choices=["conformer", "cache_aware"],
        help="random model's encoder (cache_aware: a cache-aware streaming one, NeMo's cache-aware pipeline)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--streams", default="1,8,32,64", help="comma-separated stream counts (run in this order)"
    )
    parser.add_argument("--chunks", default="0.56,1.12", help="comma-separated chunk durations, seconds")
    parser.add_argument("--decodings", default="greedy,beam", help="greedy, beam or both")
    parser.add_argument(
        "--bias-modes", default="none,registered", help=f"comma-separated, of {', '.join(BIAS_MODES)}"
    )
    parser.add_argument(
        "--cuda-graphs",
        default="auto",
        choices=["auto", "on", "off"],
        help="NeMo's CUDA-graph greedy decoder",
    )
    parser.add_argument("--seconds", type=float, default=6.72, help="audio per stream, seconds")
    parser.add_argument("--terms", type=int, default=1000, help="terms per stream's list")
    parser.add_argument("--beam-size", type=int, default=8, help="beams per stream (server default)")
    parser.add_argument(
        "--right-context", type=float, default=0.56, help="look-ahead of buffered models, s (server default)"
    )
    parser.add_argument("--lm", default="auto", help="n-gram LM for beam: a path, none, or auto (bundled)")
    parser.add_argument("--lm-alpha", type=float, default=0.7, help="LM weight (server default)")
    parser.add_argument("--max-wait-ms", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the decode worker")
    parser.add_argument("--int8-encoder", action="store_true", help="EngineConfig.int8_encoder (CPU)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration; the best is kept")
    parser.add_argument(
        "--budget-s", type=float, default=0.0, help="start no configuration after this (0: no limit)"
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument(
        "--final-passes", default="off", help="second pass for finals: off, decode or off,decode (compared)"
    )
    parser.add_argument(
        "--arbitrations",
        default="scored",
        help="with --final-passes decode: the second pass's arbitration(s), e.g. agreement,scored (compared)",
    )
    parser.add_argument(
        "--refine-partials",
        default="0",
        help="with --final-passes decode: re-read the open utterance every this many seconds, e.g. 0,1.5",
    )
    parser.add_argument(
        "--audio",
        default="babble",
        help="what streams send: babble, speech, or manifest:PATH (a NeMo manifest's recordings, e.g. the "
        "degraded real ones of issue 45, one after another from a different one per stream)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
