"""Results of a sweep: rows, a text table, CSV, JSON, per-configuration hypothesis manifests and a plot."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from eval.dataset import EvalSet
from eval.metrics import normalize, score, word_error_rate
from eval.runner import RunOutput

COLUMNS = (
    "config",
    "biasing",
    "casing",
    "decoding",
    "chunk_s",
    "tau",
    "alpha",
    "precision",
    "recall",
    "fscore",
    "fscore_cased",
    "wer",
    "rtfx",
    "vocab_s",
    "utterances",
    "skipped",
    "fscore_shown",
    "weight",
    "words",
    "false_alarms",
    "fa_per_1k",
    "wer_partial",
)


@dataclass(frozen=True)
class Row:
    """One configuration's results; percentages are 0-100, NaN where the configuration was skipped."""

    config: str
    biasing: str
    casing: str
    decoding: str
    chunk_s: float
    tau: float | None
    alpha: float | None
    precision: float
    recall: float
    fscore: float
    fscore_cased: float
    wer: float
    rtfx: float
    vocab_s: float
    utterances: int
    skipped: str | None
    fscore_shown: float = math.nan  # F cased after the service's display-form rewrite (what captions show)
    weight: float | None = None  # every term's weight (None: not given)
    words: int = 0  # reference words
    false_alarms: int = 0  # terms in the hypotheses where the reference has none (keyword fp)
    fa_per_1k: float = math.nan  # false alarms per 1,000 reference words
    wer_partial: float = math.nan  # WER of the partials shown just before each final (what the screen showed)

    @property
    def comparable(self) -> tuple[str, float]:
        """Rows with the same key differ only in their list: the no-list row is their WER baseline."""
        return (self.decoding, self.chunk_s)


def to_row(output: RunOutput, eval_set: EvalSet) -> Row:
    """Score one configuration's hypotheses against the set's references and keywords."""
    config = output.config
    base = dict(
        config=config.name,
        biasing=config.biasing,
        casing=config.casing or "-",
        decoding=config.decoding,
        chunk_s=config.chunk_s,
        tau=config.tau,
        alpha=config.alpha,
        weight=config.weight,
    )
    if output.skipped is not None:
        nan = math.nan
        return Row(
            **base,
            precision=nan,
            recall=nan,
            fscore=nan,
            fscore_cased=nan,
            wer=nan,
            rtfx=nan,
            vocab_s=nan,
            utterances=0,
            skipped=output.skipped,
        )
    refs = [item.text for item in eval_set.items]
    scores = score(refs, list(output.hyps), eval_set.keywords("display"))
    shown = score(refs, shown_hyps(output.hyps, eval_set, config.biasing), eval_set.keywords("display"))
    words = sum(len(normalize(ref).split()) for ref in refs)
    keyed = 100.0 if eval_set.terms else math.nan  # no terms (a bare manifest): no keyword figures
    return Row(
        **base,
        precision=keyed * scores.lower.precision,
        recall=keyed * scores.lower.recall,
        fscore=keyed * scores.lower.fscore,
        fscore_cased=keyed * scores.cased.fscore,
        wer=100 * scores.wer,
        fscore_shown=keyed * shown.cased.fscore,
        rtfx=output.rtfx,
        vocab_s=output.vocab_wall_s,
        utterances=len(output.hyps),
        skipped=None,
        words=words,
        false_alarms=scores.lower.fp,
        fa_per_1k=1000 * scores.lower.fp / max(1, words),
        wer_partial=100 * word_error_rate(refs, list(output.shown)) if output.shown else math.nan,
    )


def shown_hyps(hyps: Sequence[str], eval_set: EvalSet, biasing: str) -> list[str]:
    """The captions a user would read: each hypothesis through the service's display-form rewrite
    (``backend.text.vocab.EffectiveVocabulary.apply``) with its utterance's list as a user keeps it: typed in
    lower case, with the display form ("husqvarna" shown as "Husqvarna"). Without a list, unchanged."""
    from backend.text.vocab import EffectiveVocabulary, VocabularyTerm

    vocabularies: dict[str, EffectiveVocabulary] = {}
    out = []
    for item, hyp in zip(eval_set.items, hyps, strict=True):
        list_id = None if biasing == "none" else item.lists.get(biasing)
        if list_id is None:
            out.append(hyp)
            continue
        if list_id not in vocabularies:
            terms = [eval_set.terms[tid] for tid in eval_set.lists[list_id]]
            vocabularies[list_id] = EffectiveVocabulary.from_terms(
                VocabularyTerm(text=t["display"].lower(), display=t["display"]) for t in terms
            )
        out.append(vocabularies[list_id].apply(hyp)[0])
    return out


def with_shown_from_hyps(row: Row, result_dir: Path, eval_set: EvalSet) -> Row:
    """``row`` with ``fscore_shown`` computed from the run's saved ``hyps/`` (runs from before the field)."""
    if row.skipped:
        return row
    lines = (result_dir / "hyps" / f"{_safe(row.config)}.json").read_text(encoding="utf-8").splitlines()
    by_id = {entry["utt_id"]: entry["pred_text"] for entry in map(json.loads, filter(None, lines))}
    hyps = [by_id[item.utt_id] for item in eval_set.items]
    refs = [item.text for item in eval_set.items]
    shown = score(refs, shown_hyps(hyps, eval_set, row.biasing), eval_set.keywords("display"))
    return replace(row, fscore_shown=100 * shown.cased.fscore)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return (
            "n/a"
            if math.isnan(value)
            else f"{value:.1f}"
            if abs(value) >= 0.1 or value == 0
            else f"{value:.2g}"
        )
    return str(value)


def table(rows: Sequence[Row]) -> str:
    """A Markdown table (readable as plain text too)."""
    cols = (
        "config", "precision", "recall", "fscore", "fscore_cased", "fscore_shown", "wer", "wer_change",
        "wer_partial", "fa_per_1k", "rtfx", "vocab_s",
    )  # fmt: skip
    heads = (
        "configuration", "P", "R", "F", "F cased", "F shown", "WER %", "WER +", "WER partial %",
        "FA /1k words", "RTFx", "lists s",
    )  # fmt: skip
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    baselines = {row.comparable: row.wer for row in rows if row.biasing == "none" and not row.skipped}
    for row in rows:
        values = asdict(row)
        baseline = baselines.get(row.comparable)
        values["wer_change"] = row.wer - baseline if baseline is not None and row.biasing != "none" else None
        cells = [_cell(values[c]) for c in cols]
        if row.skipped:
            cells = [row.config, f"skipped: {row.skipped}"] + [""] * (len(cols) - 2)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)


def write_outputs(
    rows: Sequence[Row], outputs: Sequence[RunOutput], eval_set: EvalSet, out_dir: Path, meta: dict[str, Any]
) -> None:
    """results.csv, results.json (rows + run metadata) and hyps/<config>.json (NeMo manifests, pred_text)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "results.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))
    payload = {"meta": meta, "results": [asdict(r) for r in rows]}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    hyp_dir = out_dir / "hyps"
    hyp_dir.mkdir(exist_ok=True)
    for output in outputs:
        if output.skipped is not None:
            continue
        shown = output.shown or ("",) * len(output.hyps)
        lines = [
            json.dumps(
                {
                    "audio_filepath": str(item.audio_path),
                    "text": item.text,
                    "pred_text": hyp,
                    "utt_id": item.utt_id,
                    "shown_partials": partials,  # the partials on screen just before each final
                }
            )
            for item, hyp, partials in zip(eval_set.items, output.hyps, shown, strict=True)
        ]
        (hyp_dir / f"{_safe(output.config.name)}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


COLOURS = {"none": "black", "local": "tab:green", "global": "tab:blue", "full": "tab:red"}
MARKERS = {"-": "o", "lower": "v", "cased": "s", "insensitive": "D"}


def plot(rows: Sequence[Row], path: Path, title: str) -> None:
    """WER (x) against keyword F-score (y), one point per configuration: colour = list, marker = casing,
    hollow = beam."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for row in rows:
        if row.skipped or math.isnan(row.fscore):
            continue
        colour = COLOURS.get(row.biasing, "grey")
        beam = row.decoding == "beam"
        ax.scatter(
            row.wer,
            row.fscore,
            c="none" if beam else colour,
            edgecolors=colour,
            marker=MARKERS.get(row.casing, "o"),
            s=46 if row.chunk_s >= 1 else 26,
            linewidths=1.2,
        )
    handles = [plt.Line2D([], [], color=c, marker="o", ls="", label=k) for k, c in COLOURS.items()]
    handles += [
        plt.Line2D([], [], color="grey", marker=m, ls="", label=f"casing {k}")
        for k, m in MARKERS.items()
        if k != "-"
    ]
    handles.append(plt.Line2D([], [], color="grey", marker="o", mfc="none", ls="", label="beam (hollow)"))
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_xlabel("WER, % (lower is better)")
    ax.set_ylabel("keyword F-score, % (higher is better)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
