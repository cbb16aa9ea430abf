"""Command line of the load test: ``python -m loadtest`` (and ``captions loadtest``).

Kept light (argparse only) so ``backend/cli.py`` can import ``add_arguments`` and ``run`` cheaply; the
heavy modules are imported when a run starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.config import REPO_ROOT


def _steps(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError("steps: comma-separated client counts, e.g. 1,8,16,32") from exc
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError("steps: positive client counts")
    return steps


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("CAPTIONS_"):
        raise argparse.ArgumentTypeError("--server-env takes CAPTIONS_NAME=value")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The load test's options, on ``parser`` (a subcommand's parser or a standalone one)."""
    target = parser.add_argument_group("server")
    where = target.add_mutually_exclusive_group()
    where.add_argument("--url", help="base URL of a running server, e.g. http://127.0.0.1:8000")
    where.add_argument(
        "--start-server",
        action="store_true",
        help="start `captions serve` on a free port with a throwaway SQLite database",
    )
    target.add_argument(
        "--admin-password",
        default=os.environ.get("CAPTIONS_ADMIN_PASSWORD"),
        help="admin password of --url (default: $CAPTIONS_ADMIN_PASSWORD)",
    )
    target.add_argument(
        "--server-env",
        type=_env,
        action="append",
        default=[],
        metavar="CAPTIONS_X=V",
        help="setting for --start-server (repeatable), e.g. CAPTIONS_MAX_SESSIONS=128",
    )
    target.add_argument(
        "--server-checkout",
        type=Path,
        help="with --start-server: run `captions serve` from this checkout (e.g. a `git worktree` of an "
        "older commit), so two versions are measured by the same client",
    )
    target.add_argument("--server-pid", type=int, help="pid of the --url server, for its CPU and memory")
    target.add_argument("--origin", help="Origin header (default: the URL's scheme://host:port)")
    target.add_argument("--server-start-timeout-s", type=float, default=600.0)
    load = parser.add_argument_group("load")
    load.add_argument(
        "--steps", type=_steps, default=(1, 8, 16, 32, 64), help="client counts (default 1,8,16,32,64)"
    )
    load.add_argument("--step-seconds", type=float, default=30.0, help="streaming time of each step")
    load.add_argument("--ramp-seconds", type=float, default=5.0, help="clients of a step join over this time")
    load.add_argument("--chunk-s", type=float, choices=(0.56, 1.12), default=1.12)
    load.add_argument("--decoding", choices=("greedy", "beam"), default="greedy")
    load.add_argument("--terms", type=int, default=200, help="terms in each meeting's vocabulary (0: none)")
    load.add_argument("--clients-per-meeting", type=int, default=1)
    load.add_argument("--clients-per-user", type=int, default=4, help="<= the server's per-user session cap")
    load.add_argument(
        "--reconnect-fraction",
        type=float,
        default=0.0,
        help="fraction of clients that drop mid-stream and resume",
    )
    load.add_argument("--reconnect-delay-s", type=float, default=0.5)
    load.add_argument("--wav", type=Path, help="speech to loop (default: synthesised with espeak-ng)")
    load.add_argument("--max-minutes", type=float, default=15.0, help="hard bound on the whole run")
    load.add_argument(
        "--continue-past-capacity",
        action="store_true",
        help="run every step even after one is not real time (overload runs)",
    )
    load.add_argument(
        "--kill-at-s",
        type=float,
        metavar="SECONDS",
        help="fault mode (needs --start-server): kill -9 the server this long into each step and start it "
        "again; every client resumes and sends its held audio again; no final may be lost or doubled",
    )
    judge = parser.add_argument_group("verdict and output")
    judge.add_argument(
        "--latency-budget-ms",
        type=float,
        default=300.0,
        help="p95 chunk sent -> final latency allowed (default 300)",
    )
    judge.add_argument(
        "--max-lag-chunks",
        type=float,
        default=1.0,
        help="lag allowed, in chunks (lag counts the chunk being decoded; default 1)",
    )
    judge.add_argument("--sample-interval-s", type=float, default=1.0, help="how often /metrics is read")
    judge.add_argument("--label", default="", help="name of this run in the report and plot")
    judge.add_argument("--out", type=Path, help="output directory (default var/loadtest/<label>-<time>)")
    judge.add_argument("--no-progress", action="store_true", help="no progress display")
    judge.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="REPORT_JSON",
        help="only plot these reports together into --out/loadtest.png",
    )


def _config(args: argparse.Namespace, base_url: str, password: str, pid: int | None) -> Any:
    from loadtest.report import Criteria
    from loadtest.runner import LoadTestConfig

    label = args.label or f"{args.decoding}-{args.chunk_s}s-{args.terms}terms"
    return LoadTestConfig(
        base_url=base_url,
        admin_password=password,
        steps=args.steps,
        step_seconds=args.step_seconds,
        ramp_seconds=args.ramp_seconds,
        chunk_s=args.chunk_s,
        decoding=args.decoding,
        terms=args.terms,
        clients_per_meeting=args.clients_per_meeting,
        clients_per_user=args.clients_per_user,
        reconnect_fraction=args.reconnect_fraction,
        reconnect_delay_s=args.reconnect_delay_s,
        criteria=Criteria(args.latency_budget_ms, args.max_lag_chunks),
        wav=args.wav,
        origin=args.origin,
        server_pid=pid,
        sample_interval_s=args.sample_interval_s,
        max_total_s=args.max_minutes * 60,
        continue_past_capacity=args.continue_past_capacity,
        kill_at_s=args.kill_at_s,
        fault_grace_s=args.server_start_timeout_s,
        label=label,
        progress=not args.no_progress,
    )


def format_table(report: dict[str, Any]) -> str:
    """The steps as a fixed-width text table (also used in docs/loadtest.md)."""
    from loadtest.report import step_lag_s

    head = (
        "N",
        "conn",
        "503",
        "1013",
        "part p50/p95",
        "final p50/p95/p99 ms",
        "sentence->final p50/p95 ms",
        "longest final s",
        "lag s",
        "batch",
        "step ms",
        "cpu%",
        "rss MB",
        "dropped",
        "lost/dup/twice",
        "WER/partial %",
        "rung",
        "RT",
    )
    rows = [head]
    for s in report["steps"]:
        lag = step_lag_s(s)
        rows.append(
            (
                s["n"],
                s["connected"],
                s["handshake_503"],
                s["busy_1013"],
                f"{s['partial_ms_p50']}/{s['partial_ms_p95']}",
                f"{s['final_ms_p50']}/{s['final_ms_p95']}/{s['final_ms_p99']}",
                f"{s.get('sentence_final_ms_p50')}/{s.get('sentence_final_ms_p95')}",
                s.get("longest_final_s"),
                f"{lag:.2f}",
                f"{s['batch_mean']}/{s['batch_max']}",
                f"{s['step_ms_mean']}/{s['step_ms_p95']}",
                s["cpu_pct_mean"],
                s["rss_mb_max"],
                s["partials_dropped"],
                f"{s['finals_lost']}/{s['finals_duplicated']}/{s['finals_overlapping']}",
                f"{s.get('wer')}/{s.get('wer_partial')}",
                s.get("degradation", {}).get("ladder", {}).get("max_rung", 0),
                "yes" if s["realtime"] else "no",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines = ["  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines) + f"\ncapacity: {report['capacity']} live sessions\n"


def run(args: argparse.Namespace) -> int:
    """Run the load test from parsed arguments; exit status 1 if any final was lost or duplicated."""
    from loadtest.report import plot, write_outputs
    from loadtest.runner import run_loadtest
    from loadtest.server import ServerProcess

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = args.out or REPO_ROOT / "var" / "loadtest" / f"{args.label or 'run'}-{stamp}"
    if args.combine:
        out.mkdir(parents=True, exist_ok=True)
        plot([json.loads(p.read_text()) for p in args.combine], out / "loadtest.png")
        print(out / "loadtest.png")
        return 0
    if not (args.url or args.start_server):
        print("give --url URL (with --admin-password) or --start-server", file=sys.stderr)
        return 2
    if args.kill_at_s is not None and not args.start_server:
        print("--kill-at-s kills the server, so it needs --start-server", file=sys.stderr)
        return 2
    try:
        _config(args, args.url or "http://127.0.0.1", args.admin_password or "-", None)
    except ValueError as exc:
        print(f"invalid options: {exc}", file=sys.stderr)
        return 2
    server = (
        ServerProcess(dict(args.server_env), args.server_start_timeout_s, args.server_checkout)
        if args.start_server
        else None
    )
    try:
        if server is not None:
            server.start()
            config = _config(args, server.base_url, server.admin_password, server.pid)
        elif not args.admin_password:
            print("--admin-password (or $CAPTIONS_ADMIN_PASSWORD) is required with --url", file=sys.stderr)
            return 2
        else:
            config = _config(args, args.url, args.admin_password, args.server_pid)
        restart = server.kill_and_restart if server is not None and args.kill_at_s is not None else None
        report = asyncio.run(run_loadtest(config, restart))
    finally:
        if server is not None:
            server.stop()
    paths = write_outputs(report, out)
    print(format_table(report) + "\n".join(report["notes"]))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    bad = any(
        s["finals_lost"] or s["finals_duplicated"] or s["finals_unpersisted"] or s["finals_overlapping"]
        for s in report["steps"]
    )
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m loadtest``."""
    parser = argparse.ArgumentParser(prog="python -m loadtest", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
