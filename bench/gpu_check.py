"""Issue 28: the engine on one GPU with Parakeet-size models, shaped like TurboBias 2.0's Table III.

Run by ``bench/gpu_check.sh`` (which installs the carried wheels first); by hand:

    python bench/gpu_check.py --device cuda --out $OUT                        # the device run
    python bench/gpu_check.py --scale tiny --device cpu --streams 1,2 ...      # the CPU dry run (tests)

Sections, in priority order (a section starts only while ``--budget-s`` lasts; each gets a share of what
is left, and the engine benchmark runs the largest stream count first):
1. ``parakeet_tdt``: a RANDOM Parakeet-TDT-0.6B-shaped FastConformer TDT (our config, NeMo's modules:
   ``bench/gpu_models.py``), through the engine (buffered pipeline, as served): greedy and beam, 0.56 and
   1.12 s chunks, no biasing vs a distinct 1,000-term list per stream registered before the streams start;
2. ``decoder``: ``bench_registry.py`` on that model's decoder shape (prediction 640 x 2 LSTM layers, joint
   640, encoder 1024, 1,024 pieces): no biasing / shared graph / no cache / memory cache / registered, with
   NeMo's CUDA graphs on and off (the paper's Table III scenarios, decoding only);
3. ``cache_aware``: a RANDOM cache-aware streaming FastConformer (att_context_size [[70,13],[70,6]]: the
   recommended production model's shape) through the engine (NeMo's cache-aware pipeline encodes each chunk
   with the stream's encoder caches): greedy and beam (issue 38), as for ``parakeet_tdt``;
4. ``bundled``: ``models/captions-embedded.nemo`` (trained; beam with its bundled LM), through the engine;
5. ``parakeet_tdt`` again with NeMo's CUDA-graph greedy decoder off (CUDA only).
Then ONE table (RTFx per configuration at each stream count, GPU memory per stream), the ratios (per-stream
biasing / no biasing; beam / greedy) and the largest real-time stream count per model and chunk, printed and
written to ``OUT/gpu_check.md`` and ``OUT/gpu_check.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))
# torch, NeMo and the benchmarks are imported in the functions: the engine's vocabulary compiler is a spawned
# process, which imports this (main) module again; at the top it would import all of NeMo each time.

BUNDLED_MODEL = BENCH_DIR.parent / "models" / "captions-embedded.nemo"
PAPER = "paper (Unified 600M, 128 streams, one GPU): greedy 1812 no bias / 1714 per-stream decoder cache " \
    "(0.946) / 61 no cache; beam 1150 / 989 (0.860)"  # fmt: skip
BIAS_LABELS = {"none": "none", "registered": "per-stream, registered", "nocache": "per-stream, no cache"}


@dataclass
class Result:
    """Everything measured: engine rows (``bench_engine.Row`` as dicts) and decoder rows, per model."""

    env: dict[str, Any] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    engine_rows: list[dict[str, Any]] = field(default_factory=list)
    decoder_rows: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def environment(device: str) -> dict[str, Any]:
    import nemo
    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "nemo": nemo.__version__,
        "device": device,
        "cpu_count": os.cpu_count(),
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
        env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
        env["cuda"] = torch.version.cuda
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    return env


def free_memory(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def engine_section(
    args: argparse.Namespace,
    result: Result,
    label: str,
    model: Callable[[], Path],
    decodings: str,
    budget_s: float,
    cuda_graphs: str = "auto",
    streams: str | None = None,
) -> None:
    """``bench_engine`` on the model that ``model()`` builds (its build counts in ``budget_s``)."""
    import bench_engine

    started = time.monotonic()
    model_path = model()
    budget_s = max(1.0, budget_s - (time.monotonic() - started))
    out = Path(args.work) / f"engine_{label}_{cuda_graphs}.json"
    bench_args = bench_engine.parse_args(
        [
            "--model", str(model_path), "--device", args.device, "--streams", streams or args.streams,
            "--chunks", args.chunks, "--decodings", decodings, "--bias-modes", args.bias_modes,
            "--cuda-graphs", cuda_graphs, "--seconds", str(args.seconds), "--terms", str(args.terms),
            "--beam-size", str(args.beam_size), "--repeats", str(args.repeats),
            "--threads", str(args.threads), "--budget-s", str(budget_s), "--json", str(out),
        ]
    )  # fmt: skip
    rows = asyncio.run(bench_engine.run(bench_args))
    graphs = cuda_graphs if args.device.startswith("cuda") else "-"
    if graphs == "auto":
        graphs = "on"
    for row in rows:
        entry = row.to_json()
        entry.update(model=label, cuda_graphs=graphs if row.decoding == "greedy" else "-")
        result.engine_rows.append(entry)


def decoder_section(args: argparse.Namespace, result: Result, budget_s: float) -> None:
    import bench_registry

    full = args.scale == "full"
    graphs = "on,off" if args.device.startswith("cuda") else "off"
    out = Path(args.work) / "decoder.json"
    bench_args = bench_registry.parse_args(
        [
            "--streams", args.streams, "--audio-s", str(args.decoder_audio_s), "--terms", str(args.terms),
            "--repeats", str(args.repeats), "--device", args.device, "--cuda-graphs", graphs,
            "--encoder-dim", "1024" if full else "64", "--hidden", "640" if full else "48",
            "--pred-layers", "2", "--vocab", "1024" if full else "128", "--budget-s", str(budget_s),
            "--json", str(out),
        ]
    )  # fmt: skip
    rows = bench_registry.run(bench_args)
    for row in rows:
        row["model"] = "parakeet_tdt decoder"
        result.decoder_rows.append(row)


def run_sections(args: argparse.Namespace) -> Result:
    from gpu_models import build_model

    result = Result(env=environment(args.device))
    print("environment:", json.dumps(result.env), flush=True)
    started = time.monotonic()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    models = args.models.split(",")

    def model_path(kind: str) -> Path:
        if kind == "bundled":
            return BUNDLED_MODEL
        if kind not in built:
            import torch

            threads = torch.get_num_threads()
            if args.device.startswith("cuda"):  # a lent machine: every core for the 0.6 B model's init
                torch.set_num_threads(os.cpu_count() or 1)
            try:
                model = build_model(kind, Path(args.work), scale=args.scale)
            finally:
                torch.set_num_threads(threads)
            result.models[kind] = {
                "parameters": model.parameters,
                "build_s": round(model.build_s, 1),
                "blank_bias": round(model.blank_bias, 3),
                "random_weights": True,
            }
            print(f"built {kind} ({args.scale}): {model.parameters / 1e6:.1f} M parameters in "
                  f"{model.build_s:.1f} s", flush=True)  # fmt: skip
            built[kind] = model.path
        return built[kind]

    cuda = args.device.startswith("cuda")

    def engine(kind: str, decodings: str, graphs: str = "auto", streams: str | None = None):
        return lambda budget: engine_section(
            args, result, kind, lambda: model_path(kind), decodings, budget, graphs, streams
        )

    sections: list[tuple[str, float, Callable[[float], None]]] = []  # name, weight in the budget, body
    if "parakeet_tdt" in models:
        sections.append(("parakeet_tdt engine", 4.0, engine("parakeet_tdt", "greedy,beam")))
    if args.decoder:
        sections.append(("decoder (Table III scenarios)", 1.5, lambda b: decoder_section(args, result, b)))
    if "cache_aware" in models:
        sections.append(("cache_aware engine", 2.5, engine("cache_aware", "greedy,beam")))
    if "bundled" in models:
        result.models["bundled"] = {"random_weights": False}
        sections.append(("bundled engine", 1.5, engine("bundled", "greedy,beam")))
    if cuda and "parakeet_tdt" in models:
        top = args.streams.split(",")[0]
        sections.append(
            ("parakeet_tdt engine, CUDA graphs off", 1.0, engine("parakeet_tdt", "greedy", "off", top))
        )

    for index, (name, _, body) in enumerate(sections):
        remaining = args.budget_s - (time.monotonic() - started)
        if remaining <= 0:
            result.skipped.append(name)
            print(f"== {name}: left out (budget spent)", flush=True)
            continue
        weights = [weight for _, weight, _ in sections[index:]]
        share = remaining * weights[0] / sum(weights)
        print(f"== {name} (budget {share:.0f} s of {remaining:.0f} s left)", flush=True)
        section_started = time.monotonic()
        try:
            body(share)
        except Exception as exc:  # one broken section must not cost the others
            traceback.print_exc()
            result.failures.append(f"{name}: {exc!r}"[:500])
        print(f"== {name}: {time.monotonic() - section_started:.0f} s", flush=True)
        free_memory(args.device)
        write_report(args, result, final=False)
    result.env["total_s"] = round(time.monotonic() - started, 1)
    return result


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(result: Result, stream_counts: list[int]) -> str:
    """The Table-III-shaped markdown table, ratios and real-time capacities."""
    lines = []
    counts = sorted(stream_counts)
    header = ["model", "level", "chunk s", "decoding", "biasing", "CUDA graphs"]
    header += [f"RTFx @{n}" for n in counts] + [f"GPU MB/stream @{counts[-1]}", "words/s"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    groups: dict[tuple, dict[int, dict]] = {}
    for row in result.engine_rows:
        key = (row["model"], "engine", row["chunk_s"], row["decoding"], row["bias"], row["cuda_graphs"])
        groups.setdefault(key, {})[row["streams"]] = row
    for row in result.decoder_rows:
        key = (row["model"], "decoder", 0.56, "greedy", row["scenario"], row["cuda_graphs"])
        groups.setdefault(key, {})[row["streams"]] = row
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[5], k[3], k[2], k[4])):
        by_count = groups[key]
        model, level, chunk_s, decoding, bias, graphs = key
        top = by_count.get(counts[-1], {})
        audio = sum(r.get("audio_s", 0.0) for r in by_count.values())
        words = sum(r.get("words", 0) for r in by_count.values())
        cells = [model, level, f"{chunk_s:.2f}", decoding, BIAS_LABELS.get(bias, bias), graphs]
        cells += [_fmt(by_count[n]["rtfx"]) if n in by_count else "-" for n in counts]
        cells.append(_fmt(top.get("gpu_mb_per_stream")))
        cells.append(_fmt(words / audio, 2) if level == "engine" and audio else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.extend(ratio_table(groups, counts))
    lines.append("")
    lines.extend(capacity_table(result.engine_rows))
    if result.skipped:
        lines.append("")
        lines.append("Left out (budget): " + "; ".join(result.skipped))
    if result.failures:
        lines.append("")
        lines.append("FAILED: " + "; ".join(result.failures))
    return "\n".join(lines)


def ratio_table(groups: dict[tuple, dict[int, dict]], counts: list[int]) -> list[str]:
    """Per-stream biasing / no biasing and beam / greedy (RTFx over RTFx at the same stream count)."""
    header = ["model", "level", "chunk s", "CUDA graphs", "ratio"] + [f"@{n}" for n in counts]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def add(key: tuple, name: str, over: dict[int, dict], under: dict[int, dict]) -> None:
        model, level, chunk_s, graphs = key
        cells = [model, level, f"{chunk_s:.2f}", graphs, name]
        cells += [
            f"{over[n]['rtfx'] / under[n]['rtfx']:.3f}" if n in over and n in under else "-" for n in counts
        ]
        if any(cell != "-" for cell in cells[5:]):
            lines.append("| " + " | ".join(cells) + " |")

    for key in sorted(groups, key=str):
        model, level, chunk_s, decoding, bias, graphs = key
        by_count = groups[key]
        label = BIAS_LABELS.get(bias, bias)
        if level == "engine" and bias != "none":
            base = groups.get((model, level, chunk_s, decoding, "none", graphs), {})
            add((model, level, chunk_s, graphs), f"{decoding}: {label} / no biasing", by_count, base)
        if level == "engine" and decoding == "beam":
            for greedy_graphs in ("on", "-"):
                base = groups.get((model, level, chunk_s, "greedy", bias, greedy_graphs), {})
                add((model, level, chunk_s, greedy_graphs), f"{label}: beam / greedy", by_count, base)
        if level == "decoder" and bias != "no biasing":
            base = groups.get((model, level, chunk_s, decoding, "no biasing", graphs), {})
            add((model, level, chunk_s, graphs), f"{bias} / no biasing", by_count, base)
    lines.append("")
    lines.append(f"For comparison, {PAPER}.")
    return lines


def capacity_table(engine_rows: list[dict[str, Any]]) -> list[str]:
    """The largest tested stream count in real time (RTFx >= streams) per model, chunk and configuration;
    in brackets the RTFx at the largest count, a throughput bound on how many more would fit."""
    configs = [(d, b) for d in ("greedy", "beam") for b in ("none", "registered", "nocache")]
    configs = [c for c in configs if any((r["decoding"], r["bias"]) == c for r in engine_rows)]
    header = ["model", "chunk s"] + [f"{d}, {BIAS_LABELS[b]}" for d, b in configs]
    lines = [
        "Streams in real time (largest tested count with RTFx >= streams; RTFx @ the largest in brackets):",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    rows = [r for r in engine_rows if r["cuda_graphs"] != "off"]
    for model, chunk_s in sorted({(r["model"], r["chunk_s"]) for r in rows}):
        cells = [model, f"{chunk_s:.2f}"]
        for decoding, bias in configs:
            same = [
                r
                for r in rows
                if (r["model"], r["chunk_s"], r["decoding"], r["bias"]) == (model, chunk_s, decoding, bias)
            ]
            if not same:
                cells.append("-")
                continue
            live = max((r["streams"] for r in same if r["rtfx"] >= r["streams"]), default=0)
            top = max(same, key=lambda r: r["streams"])
            cells.append(f"{live} ({top['rtfx']:.0f} @{top['streams']})")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", default="full", choices=["full", "tiny"], help="model sizes (tiny: CPU dry run)"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--models", default="parakeet_tdt,cache_aware,bundled", help="built ones and the bundled"
    )
    parser.add_argument("--streams", default="128,1,64,32", help="stream counts, most important first")
    parser.add_argument("--chunks", default="1.12,0.56")
    parser.add_argument("--bias-modes", default="none,registered")
    parser.add_argument("--seconds", type=float, default=6.72, help="audio per stream (engine)")
    parser.add_argument("--decoder-audio-s", type=float, default=13.44, help="audio per stream (decoder)")
    parser.add_argument("--terms", type=int, default=1000)
    parser.add_argument("--beam-size", type=int, default=8, help="the server's default")
    parser.add_argument("--repeats", type=int, default=2, help="runs per configuration; the best counts")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-decoder", dest="decoder", action="store_false", help="skip the decoder section")
    parser.add_argument("--budget-s", type=float, default=300.0, help="seconds for all sections together")
    parser.add_argument("--work", default="/tmp/gpu_check", help="models and intermediate rows")
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/out"), help="where the table goes")
    return parser.parse_args(argv)


def write_report(args: argparse.Namespace, result: Result, final: bool = True) -> str:
    """The report (markdown) and every row (JSON) in ``--out``; written after each section too, so that a
    run stopped by its time limit still leaves what it measured."""
    text = table(result, [int(n) for n in args.streams.split(",")])
    env = ", ".join(f"{k} {v}" for k, v in result.env.items())
    models = "; ".join(
        f"{kind}: {info['parameters'] / 1e6:.1f} M, random"
        if info.get("random_weights")
        else f"{kind}: trained"
        for kind, info in result.models.items()
    )
    status = "" if final else " (partial: still running)"
    report = f"# gpu_check ({args.scale}){status}\n\n{env}\n\nmodels: {models}\n\n{text}\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.md").write_text(report, encoding="utf-8")
    payload = {
        "args": vars(args),
        "env": result.env,
        "models": result.models,
        "engine_rows": result.engine_rows,
        "decoder_rows": result.decoder_rows,
        "failures": result.failures,
        "skipped": result.skipped,
    }
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    torch.set_num_threads(max(args.threads, 1))
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("CUDA is not available here", flush=True)
        return 2
    result = run_sections(args)
    report = write_report(args, result)
    print()
    print(report, flush=True)
    return 1 if result.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
