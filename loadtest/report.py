"""Per-step figures, the real-time verdict, the capacity figure and the JSON/CSV/PNG outputs.

Pure functions over what the clients and samplers recorded (no I/O except ``write_outputs``/``plot``).
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.client import ClientResult
from loadtest.wer import step_wer

DROPPED = "captions_partials_dropped_total"
PERSISTED = "captions_finals_persisted_total"
LAG = "captions_max_lag_seconds"
BATCH = "captions_engine_batch_streams"
STEP_MS = "captions_engine_step_ms"
SESSIONS = "captions_sessions"
DEGRADATION_ORDER = ("partials_dropped", "handshake_503", "busy_1013")


@dataclass(frozen=True)
class Sample:
    """One look at the server during a step: /metrics, /readyz and its process (None when unknown)."""

    t_s: float  # seconds since the step started
    metrics: dict[str, float]
    ready: bool | None
    cpu_pct: float | None
    rss_mb: float | None


@dataclass(frozen=True)
class Criteria:
    """When a step counts as real time: lag at most ``max_lag_chunks`` chunks (``lag_s`` counts the
    chunk being decoded, so 1 chunk = no backlog) and p95 chunk-sent -> final latency within
    ``latency_budget_ms``."""

    latency_budget_ms: float = 300.0
    max_lag_chunks: float = 1.0


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct`` percentile, linear between closest ranks (numpy's default); None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _pcts(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    return {f"{prefix}_p{p}": _round(percentile(values, p)) for p in (50, 95, 99)} | {
        f"{prefix}_n": len(values)
    }


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def finals_check(
    received: Iterable[tuple[str, int]], persisted: Iterable[tuple[str, int]], session_ids: set[str]
) -> dict[str, int]:
    """Compare finals the clients got with what the server persisted for these sessions.

    ``lost``: persisted, never received; ``duplicated``: received more than once (extra copies);
    ``unpersisted``: received, not persisted. All must be zero."""
    have = Counter(received)
    stored = Counter(key for key in persisted if key[0] in session_ids)
    return {
        "finals_persisted": sum(stored.values()),
        "finals_received": sum(have.values()),
        "finals_lost": sum(1 for key in stored if have[key] == 0),
        "finals_duplicated": sum(count - 1 for count in have.values() if count > 1),
        "finals_unpersisted": sum(1 for key in have if key not in stored),
    }


OVERLAP_TOLERANCE_S = 0.1


def finals_overlapping(persisted: Iterable[dict[str, Any]], session_ids: set[str]) -> int:
    """Stored finals of these sessions that start before the previous final of their session ended (by more
    than ``OVERLAP_TOLERANCE_S``): the same audio decoded twice, e.g. by a dropped connection and by the
    resume that sent that audio again. Must be zero."""
    by_session: dict[str, list[tuple[int, float, float]]] = {}
    for c in persisted:
        if c["session_id"] in session_ids:
            by_session.setdefault(c["session_id"], []).append((c["seq"], c["start_s"], c["end_s"]))
    overlapping = 0
    for finals in by_session.values():
        finals.sort()
        pairs = zip(finals, finals[1:], strict=False)
        overlapping += sum(1 for before, after in pairs if after[1] < before[2] - OVERLAP_TOLERANCE_S)
    return overlapping


def _lost_after_refused_resume(clients: Sequence[ClientResult], persisted: Sequence[tuple[str, int]]) -> int:
    """Of the lost finals, those of clients that dropped and whose every resume was refused (503): the server
    persisted them and would replay them on a later resume, the client gave up first."""
    gave_up = [c for c in clients if c.session_id and c.dropped and c.handshake_status is not None]
    return sum(finals_check(c.finals, persisted, {c.session_id})["finals_lost"] for c in gave_up)


def degradation(
    clients: Sequence[ClientResult], samples: Sequence[Sample], started_at: float
) -> dict[str, Any]:
    """When (s since the step start) each overload stage was first seen, and whether they came in the order
    RELIABILITY.md row 5 promises: partials dropped, then 503 handshakes, then 1013 busy."""
    baseline = samples[0].metrics.get(DROPPED, 0.0) if samples else 0.0
    first_drop = next((s.t_s for s in samples if s.metrics.get(DROPPED, 0.0) > baseline), None)
    refused = [
        c.handshake_refused_at
        for c in clients
        if c.handshake_status == 503 and c.handshake_refused_at is not None
    ]
    busy = [c.busy_at for c in clients if c.busy_at is not None]
    events = {
        "partials_dropped": first_drop,
        "handshake_503": round(min(refused) - started_at, 2) if refused else None,
        "busy_1013": round(min(busy) - started_at, 2) if busy else None,
        "not_ready": next((s.t_s for s in samples if s.ready is False), None),
    }
    seen = [(at, name) for name in DEGRADATION_ORDER if (at := events[name]) is not None]
    order = [name for _, name in sorted(seen, key=lambda event: event[0])]  # stable: ties keep row 5's order
    rungs = {  # the degradation ladder (captions_load_rung): when each rung was first seen
        name: next((s.t_s for s in samples if s.metrics.get(RUNG, 0.0) >= level), None)
        for level, name in enumerate(LADDER, start=1)
    }
    reached = [at for name in LADDER if (at := rungs[name]) is not None]
    ladder = {
        "rungs_s": rungs,
        "max_rung": max((int(s.metrics.get(RUNG, 0.0)) for s in samples), default=0),
        "in_order": reached == sorted(reached),
    }
    in_order = order == [name for _, name in seen]
    return {"events_s": events, "order": order, "in_order": in_order, "ladder": ladder}


def _server_figures(samples: Sequence[Sample], steady_s: tuple[float, float]) -> dict[str, Any]:
    """Batch size, step time and CPU over the steady window (every client joined); lag and memory over all."""
    steady = [s for s in samples if steady_s[0] <= s.t_s <= steady_s[1] and s.metrics.get(SESSIONS, 0.0) > 0]
    batches = [s.metrics[BATCH] for s in steady if BATCH in s.metrics]
    steps_ms = [s.metrics[STEP_MS] for s in steady if STEP_MS in s.metrics]
    cpu = [s.cpu_pct for s in steady if s.cpu_pct is not None]
    rss = [s.rss_mb for s in samples if s.rss_mb is not None]
    first, last = (samples[0].metrics, samples[-1].metrics) if samples else ({}, {})

    def delta(name: str) -> float:
        return last.get(name, 0.0) - first.get(name, 0.0)

    return {
        "server_max_lag_s": _round(max((s.metrics.get(LAG, 0.0) for s in samples), default=None), 2),
        "batch_mean": _round(sum(batches) / len(batches) if batches else None),
        "batch_max": max(batches, default=None),
        "step_ms_mean": _round(sum(steps_ms) / len(steps_ms) if steps_ms else None),
        "step_ms_p95": _round(percentile(steps_ms, 95)),
        "cpu_pct_mean": _round(sum(cpu) / len(cpu) if cpu else None),
        "rss_mb_max": _round(max(rss, default=None)),
        "partials_dropped": int(delta(DROPPED)),
        "rejected_busy": int(delta("captions_rejected_sessions_total{reason=busy}")),
        "rejected_capacity": int(delta("captions_rejected_sessions_total{reason=capacity}")),
        "not_ready_samples": sum(1 for s in samples if s.ready is False),
    }


def summarize_step(
    n: int,
    chunk_s: float,
    clients: Sequence[ClientResult],
    samples: Sequence[Sample],
    persisted: Sequence[dict[str, Any]],
    started_at: float,
    criteria: Criteria,
    steady_s: tuple[float, float] = (0.0, math.inf),
) -> dict[str, Any]:
    """The report row of one step (docs/loadtest.md explains each field). ``steady_s``: the part of the step
    (seconds since its start) when every client has joined. ``persisted``: the stored finals of the step's
    meetings, as the captions API returns them."""
    keys = [(c["session_id"], c["seq"]) for c in persisted]
    sessions = {c.session_id for c in clients if c.session_id}
    partial = [x for c in clients for x in c.partial_latency_ms]
    final = [x for c in clients for x in c.final_latency_ms]
    sentence_final = [x for c in clients for x in c.sentence_final_ms]
    lags = [c.max_lag_s for c in clients if c.connections]
    codes = Counter(code for c in clients for code in c.close_codes)
    errors = Counter(e for c in clients for e in c.errors)
    step: dict[str, Any] = {
        "n": n,
        "chunk_s": chunk_s,
        "connected": sum(1 for c in clients if c.connections),
        "handshake_503": sum(1 for c in clients if c.handshake_status == 503),
        "handshake_other": sum(1 for c in clients if c.handshake_status not in (None, 503)),
        "busy_1013": sum(1 for c in clients if c.busy_at is not None or 1013 in c.close_codes),
        "reconnected": sum(1 for c in clients if c.dropped),
        "resume_refusals": sum(c.resume_refusals for c in clients),
        "replayed_finals": sum(c.replayed_finals for c in clients),
        "chunks_sent": sum(c.chunks_sent for c in clients),
        "partials": sum(c.partials for c in clients),
        **_pcts(partial, "partial_ms"),
        **_pcts(final, "final_ms"),
        **_pcts(sentence_final, "sentence_final_ms"),
        "longest_final_s": _round(max((c.longest_final_s for c in clients), default=None), 1),
        "stream_max_lag_s": _round(max(lags, default=None), 2),
        "stream_max_ack_lag_s": _round(max((c.max_ack_lag_s for c in clients), default=None), 2),
        "streams_lagging": sum(
            1 for c in clients if max(c.max_lag_s, c.max_ack_lag_s) > criteria.max_lag_chunks * chunk_s + 1e-6
        ),
        **_server_figures(samples, steady_s),
        "close_codes": {str(k): v for k, v in sorted(codes.items())},
        "errors": dict(errors.most_common()),
        **finals_check((f for c in clients for f in c.finals), keys, sessions),
        "finals_overlapping": finals_overlapping(persisted, sessions),
        "finals_lost_resume_refused": _lost_after_refused_resume(clients, keys),
        "outages": sum(c.outages for c in clients),
        "reconnect_attempts": sum(c.reconnect_attempts for c in clients),
        "not_captioned_s": round(sum(c.not_captioned_s for c in clients), 2),
        "degradation": degradation(clients, samples, started_at),
        **step_wer(clients),
    }
    step["realtime"], step["not_realtime_because"] = verdict(step, criteria)
    return step


def step_lag_s(step: dict[str, Any]) -> float:
    """The step's worst lag, seconds: partials' ``lag_s``, ``audio_s`` acknowledgements, /metrics."""
    keys = ("stream_max_lag_s", "stream_max_ack_lag_s", "server_max_lag_s")
    return max(step.get(key) or 0.0 for key in keys)


def verdict(step: dict[str, Any], criteria: Criteria) -> tuple[bool, list[str]]:
    """Whether every stream of the step stayed real time, and if not, why."""
    reasons = []
    lag_limit_s = criteria.max_lag_chunks * step["chunk_s"] + 1e-6
    lag = step_lag_s(step)
    if step["connected"] < step["n"] or step["handshake_503"] or step["handshake_other"]:
        reasons.append("not every client connected")
    if step["busy_1013"]:
        reasons.append("sessions closed 1013")
    if lag > lag_limit_s:
        reasons.append(f"lag {lag:.2f} s > {lag_limit_s:.2f} s")
    if step["final_ms_p95"] is None:
        reasons.append("no final latency measured")
    elif step["final_ms_p95"] > criteria.latency_budget_ms:
        reasons.append(f"p95 final latency {step['final_ms_p95']} ms > {criteria.latency_budget_ms} ms")
    if step["finals_lost"] or step["finals_duplicated"] or step["finals_unpersisted"]:
        reasons.append("finals lost or duplicated")
    if step.get("finals_overlapping"):
        reasons.append("audio decoded twice (overlapping finals)")
    if step["errors"]:
        reasons.append("errors: " + ", ".join(step["errors"]))
    return not reasons, reasons


def capacity(steps: Sequence[dict[str, Any]]) -> int:
    """The largest N such that that step and every smaller step stayed real time (0 if none did)."""
    best = 0
    for step in sorted(steps, key=lambda s: s["n"]):
        if not step["realtime"]:
            break
        best = step["n"]
    return best


RUNG = "captions_load_rung"
# the rungs of backend.sessions.ladder, in order
LADDER = ("second_pass_off", "greedy_for_new", "fewer_partials", "refuse_new", "shed_newest")

CSV_FIELDS = (
    "label n connected handshake_503 busy_1013 reconnected partial_ms_p50 partial_ms_p95 partial_ms_p99 "
    "final_ms_p50 final_ms_p95 final_ms_p99 final_ms_n sentence_final_ms_p50 sentence_final_ms_p95 "
    "sentence_final_ms_n longest_final_s streams_lagging "
    "stream_max_lag_s server_max_lag_s batch_mean batch_max "
    "step_ms_mean step_ms_p95 cpu_pct_mean rss_mb_max partials_dropped finals_persisted finals_lost "
    "finals_duplicated finals_overlapping outages not_captioned_s wer wer_partial wer_streams realtime"
).split()


def write_outputs(report: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """``report.json``, ``steps.csv`` and ``loadtest.png`` in ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "csv": out_dir / "steps.csv", "png": out_dir / "loadtest.png"}
    paths["json"].write_text(json.dumps(report, indent=2) + "\n")
    with paths["csv"].open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*CSV_FIELDS, "close_codes", "errors"])
        writer.writeheader()
        for step in report["steps"]:
            row = {k: step.get(k) for k in CSV_FIELDS} | {"label": report["label"]}
            row |= {"close_codes": json.dumps(step["close_codes"]), "errors": json.dumps(step["errors"])}
            writer.writerow(row)
    plot([report], paths["png"])
    return paths


def plot(reports: Sequence[dict[str, Any]], path: Path) -> None:
    """Chunk -> final p95 (solid) and chunk -> partial p95 (dotted) latency, and max lag in chunks, against N;
    one colour per report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=80)
    for report in reports:
        steps = sorted(report["steps"], key=lambda s: s["n"])
        ns = [s["n"] for s in steps]
        line = left.plot(ns, [s["final_ms_p95"] for s in steps], marker="o", label=report["label"])
        colour = line[0].get_color()
        left.plot(ns, [s["partial_ms_p95"] for s in steps], ls=":", marker=".", color=colour)
        lags = [step_lag_s(s) / s["chunk_s"] for s in steps]
        right.plot(ns, lags, marker="o", color=colour, label=report["label"])
    budget = reports[0]["criteria"]["latency_budget_ms"] if reports else 300
    left.axhline(budget, color="grey", lw=0.8, ls="--")
    right.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.set(xlabel="live sessions N", ylabel="p95 latency after chunk sent, ms")
    right.set(xlabel="live sessions N", ylabel="max lag, chunks")
    left.set_title("final (solid), partial (dotted)", fontsize=9)
    right.set_title("audio received - decoded", fontsize=9)
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
