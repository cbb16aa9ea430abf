"""Score first pass vs second pass (``EngineConfig.final_pass``) through the engine, as the server streams it.

Every utterance is streamed in chunks of ``--chunk`` seconds through ``backend.engine`` (buffered: 2 s left,
0.56 s right, as served; ``eval.runner.decode_stream``, the last chunk zero-padded) and its finals are joined.
One engine is built per (setting, final pass, chunk) and decodes every set in turn, single process.

Sets: ``--manifest`` NeMo manifests (``audio_filepath`` absolute, or relative to the manifest's folder;
``text``; optional ``utt_id``, ``voice``/``source``, ``cased``), e.g.

- ``training/work/test_festival/manifest_t0.json``: the model card's held-out set (150 held-out sentences x
  2 held-out Festival voices, 300 utterances, 17.5 min; ``training.text`` + ``training.synth``);
- ``training/work/dev_festival/manifest.json``: a tuning split (test.txt sentences 301-340 x the same voices,
  80 utterances, 4.7 min), disjoint from the test set;
- ``training/work/real/manifest.json``: real human speech (15 utterances, 1.6 min; ``training.real_data``).

``--wav`` adds loose WAV files as a set ``wav`` (the moonshine wheel's ``two_cities.wav`` / ``beckett.wav``
have references in ``REFERENCES``; other files are printed, not scored).

Two WERs per set, both pooled over words (sum of word edit distances / reference words, NeMo's
``word_error_rate``):

- **cased**: case and punctuation count, words split on spaces, as ``training/evaluate.py`` scores the
  synthetic sets. Only on utterances whose reference is cased and punctuated (manifest ``"cased"``, default
  true; the real set: ``beckett`` and ``arctic_a0007`` only, the others' references are lower-case);
- **lower**: lower-cased, every character but ``a-z``, digits and ``'`` replaced by a space
  (``plain_words``; so "ill-disposed" is two words), on every utterance with a reference.

Numbers: the first pass writes numbers as words (its pieces have no digits); a reference, or a second pass,
may contain digits. Both sides, in both WERs, get the same rewrite (``spell_numbers``) before scoring:
"10" -> "ten", "250" -> "two hundred and fifty" (British "and", compounds joined by a space as the eval
references and ``captions_model.spoken_form`` write them), "1,500" -> cardinal, "3.5" -> "three point five",
"3rd" -> "third", "50%" -> "fifty percent", 1100-2099 without a comma as a year ("1999" -> "nineteen ninety
nine", "2005" -> "two thousand and five"), a leading zero digit by digit ("007" -> "zero zero seven"). Today
no reference in these sets contains a digit (the pocketsphinx references already spell them), so the rewrite
only matters for a pass that writes digits.

Settings: ``greedy`` or ``beam:<beams>:<lm weight>[:<token bonus>]`` (weight 0: no LM; the bonus is
``EngineConfig.lm_token_bonus``); the service's is ``beam:8:0.7:1`` (the default here). ``--final-pass``:
a comma list of ``EngineConfig.final_pass`` values (``off``, ``decode``); ``off`` is not passed to the engine,
so the tool also runs on an engine without the field. ``--final-pass-model PATH``: the second pass's model
file (``EngineConfig.final_pass_model``; default: the bundled one), passed for the runs other than ``off``.
Runs with a second pass also record its outcomes per set (``Engine.stats().final_pass_outcomes``, counted
over that set's finals) in results.json and the log.

Prints a Markdown table per set (rows: setting x final pass; columns: chunk x cased / lower WER) and writes
``--out``/results.json with every hypothesis and reference (diffable) and per-voice/source WERs.

Usage::

    .venv/bin/python -m training.real_speech --manifest training/work/test_festival/manifest_t0.json \
        training/work/real/manifest.json --settings beam:8:0.7:1 --final-pass off,decode \
        --chunk 1.12 0.56 --out training/work/score_final_pass
    W=.venv/lib/python3.11/site-packages/moonshine_voice/assets
    python -m training.real_speech --settings greedy beam:8:0.7 --wav $W/two_cities.wav $W/beckett.wav
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from captions_model.words import edit_distance

REFERENCES = {
    "two_cities.wav": (
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of "
        "Light, it was the season of Darkness, it was the spring of hope, it was the winter of despair, we "
        "had everything before us, we had nothing before us, we were all going direct to Heaven, we were all "
        "going direct the other way - in short, the period was so far like the present period, that some of "
        "its noisiest authorities insisted on its being received, for good or for evil, in the superlative "
        "degree of comparison only."
    ),
    "beckett.wav": "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better.",
}


@dataclass(frozen=True)
class Setting:
    """One decoding setting: greedy, or beam search with ``beams`` beams and LM weight ``lm_alpha``."""

    decoding: str
    beams: int = 1
    lm_alpha: float = 0.0
    token_bonus: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Setting:
        if text == "greedy":
            return cls("greedy")
        parts = text.split(":")
        if len(parts) not in (3, 4) or parts[0] != "beam":
            raise ValueError(f"{text!r}: expected 'greedy' or 'beam:<beams>:<lm weight>[:<token bonus>]'")
        beams, alpha = int(parts[1]), float(parts[2])
        bonus = float(parts[3]) if len(parts) == 4 else 0.0
        if beams < 1 or alpha < 0 or bonus < 0:
            raise ValueError(f"{text!r}: beams must be >= 1, the LM weight and the bonus >= 0")
        return cls("beam", beams, alpha, bonus)

    def __str__(self) -> str:
        if self.decoding == "greedy":
            return "greedy"
        bonus = f", bonus {self.token_bonus:g}" if self.token_bonus else ""
        return f"beam {self.beams}, LM {self.lm_alpha:g}{bonus}"


def parse_final_passes(text: str) -> list[str]:
    """``off,decode`` -> ["off", "decode"] (order kept, duplicates dropped)."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if not re.fullmatch(r"[a-z][a-z0-9_]*", m)]
    if not modes or bad:
        raise ValueError(f"{text!r}: expected a comma list of final pass modes, e.g. 'off,decode'")
    return list(dict.fromkeys(modes))


# --- numbers as words ------------------------------------------------------------------------------------

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ("", "thousand", "million", "billion", "trillion")
_ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth"}
_ORDINAL |= {"nine": "ninth", "twelve": "twelfth"}
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(st|nd|rd|th)?(%)?(?![\w])")


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
    if rest:
        if hundreds:
            words.append("and")
        if rest < 20:
            words.append(_ONES[rest])
        else:
            tens, ones = divmod(rest, 10)
            words += [_TENS[tens]] + ([_ONES[ones]] if ones else [])
    return words


def cardinal_words(n: int) -> str:
    """0 -> "zero", 250 -> "two hundred and fifty", 1050 -> "one thousand and fifty"."""
    if n == 0:
        return "zero"
    if n >= 1000 ** len(_SCALES):
        return " ".join(_ONES[int(d)] for d in str(n))
    groups: list[int] = []
    while n:
        n, g = divmod(n, 1000)
        groups.append(g)
    words: list[str] = []
    for i in range(len(groups) - 1, -1, -1):
        g = groups[i]
        if not g:
            continue
        if i == 0 and words and g < 100:
            words.append("and")
        words += _below_thousand(g) + ([_SCALES[i]] if i else [])
    return " ".join(words)


def year_words(n: int) -> str:
    """1999 -> "nineteen ninety nine", 1905 -> "nineteen oh five", 1900 -> "nineteen hundred",
    2005 -> "two thousand and five", 2026 -> "twenty twenty six"."""
    if 2000 <= n <= 2009:
        return cardinal_words(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal_words(high)} hundred"
    tail = f"oh {_ONES[low]}" if low < 10 else cardinal_words(low)
    return f"{cardinal_words(high)} {tail}"


def ordinal_words(n: int) -> str:
    """3 -> "third", 21 -> "twenty first", 40 -> "fortieth"."""
    words = cardinal_words(n).split()
    last = words[-1]
    if last in _ORDINAL:
        words[-1] = _ORDINAL[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def _spell(m: re.Match[str]) -> str:
    digits, decimals, suffix, percent = m.group(1), m.group(2), m.group(3), m.group(4)
    plain = digits.replace(",", "")
    if suffix and not decimals:
        words = ordinal_words(int(plain))
    elif len(plain) > 1 and plain.startswith("0") and not decimals:
        words = " ".join(_ONES[int(d)] for d in plain)
    elif (
        "," not in digits and not decimals and not percent and len(plain) == 4 and 1100 <= int(plain) <= 2099
    ):
        words = year_words(int(plain))
    else:
        words = cardinal_words(int(plain))
        if decimals:
            words += " point " + " ".join(_ONES[int(d)] for d in decimals[1:])
    return words + (" percent" if percent else "")


def spell_numbers(text: str) -> str:
    """Every number written in digits replaced by its words (see the module docstring); other text kept."""
    return _NUMBER.sub(_spell, text)


# --- scoring ---------------------------------------------------------------------------------------------


def plain_words(text: str) -> list[str]:
    """Lower-cased words without punctuation (apostrophes kept), numbers spelled out first."""
    return re.sub(r"[^a-z0-9' ]", " ", spell_numbers(text).lower()).split()


def cased_words(text: str) -> list[str]:
    """Words as ``training/evaluate.py`` compares them (split on spaces, case and marks kept), numbers spelled
    out first."""
    return spell_numbers(text).split()


def corpus_wer(pairs: list[tuple[list[str], list[str]]]) -> tuple[float, int, int]:
    """(WER, errors, reference words) pooled over (hyp words, ref words) pairs; WER nan without words."""
    errors = sum(edit_distance(h, r) for h, r in pairs)
    words = sum(len(r) for _, r in pairs)
    return (errors / words if words else float("nan")), errors, words


def pooled_wer(hyps: dict[str, str]) -> tuple[float, int]:
    """Lower-case WER over the files named in ``REFERENCES``, pooled by words; and the reference words."""
    names = sorted(n for n in hyps if n in REFERENCES)
    wer, _, words = corpus_wer([(plain_words(hyps[n]), plain_words(REFERENCES[n])) for n in names])
    return wer, words


@dataclass
class Utterance:
    """One item of a set: its audio, reference ("" if unscored), group (voice or source) for breakdowns."""

    utt_id: str
    audio: Path
    ref: str
    cased: bool = True
    group: str = ""
    duration: float = 0.0


@dataclass
class EvalSet:
    name: str
    utterances: list[Utterance] = field(default_factory=list)
    path: Path | None = None

    @property
    def minutes(self) -> float:
        return sum(u.duration for u in self.utterances) / 60


def resolve_audio(path: str, manifest: Path) -> Path:
    """A manifest's ``audio_filepath``: as written if it exists, else relative to the manifest's folder, else
    ``<manifest folder>/wav/<file name>`` (absolute paths written on another machine or checkout)."""
    candidates = [Path(path), manifest.parent / path, manifest.parent / "wav" / Path(path).name]
    return next((c for c in candidates if c.exists()), candidates[0])


def read_manifest(path: Path, limit: int = 0, name: str | None = None) -> EvalSet:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    entries = entries[:limit] if limit else entries
    utts = [
        Utterance(
            utt_id=e.get("utt_id") or Path(e["audio_filepath"]).stem,
            audio=resolve_audio(e["audio_filepath"], path),
            ref=e.get("text") or "",
            cased=bool(e.get("cased", True)),
            group=e.get("voice") or e.get("source") or "",
            duration=float(e.get("duration", 0.0)),
        )
        for e in entries
    ]
    return EvalSet(name or path.parent.name, utts, path)


def wav_set(wavs: list[Path], limit: int = 0) -> EvalSet:
    """Loose WAVs; references from ``REFERENCES`` (lower-case scoring only: the readings' punctuation is not
    known)."""
    import soundfile as sf

    wavs = wavs[:limit] if limit else wavs
    utts = [
        Utterance(
            w.stem,
            w,
            REFERENCES.get(w.name, ""),
            cased=False,
            group=w.name,
            duration=sf.info(str(w)).duration,
        )
        for w in wavs
    ]
    return EvalSet("wav", utts)


def unique_names(sets: list[EvalSet]) -> list[EvalSet]:
    """Sets named by their manifest's folder; where two share a folder, ``<folder>/<manifest stem>``."""
    counts: dict[str, int] = {}
    for s in sets:
        counts[s.name] = counts.get(s.name, 0) + 1
    for s in sets:
        if counts[s.name] > 1 and s.path is not None:
            s.name = f"{s.name}/{s.path.stem}"
    return sets


def score_set(eval_set: EvalSet, hyps: list[str]) -> dict:
    """Cased and lower-case WER of ``hyps`` (in ``eval_set``'s order), per group too, and the per-utterance
    records."""
    scored = [(u, h) for u, h in zip(eval_set.utterances, hyps, strict=True) if u.ref]
    cased = [(cased_words(h), cased_words(u.ref)) for u, h in scored if u.cased]
    lower = [(plain_words(h), plain_words(u.ref)) for u, h in scored]
    cased_wer, cased_err, cased_n = corpus_wer(cased)
    lower_wer, lower_err, lower_n = corpus_wer(lower)
    groups: dict[str, dict] = {}
    for g in sorted({u.group for u, _ in scored}):
        sel = [(u, h) for u, h in scored if u.group == g]
        groups[g] = {
            "n": len(sel),
            "cased_wer": corpus_wer([(cased_words(h), cased_words(u.ref)) for u, h in sel if u.cased])[0],
            "lower_wer": corpus_wer([(plain_words(h), plain_words(u.ref)) for u, h in sel])[0],
        }
    utterances = []
    for u, h in zip(eval_set.utterances, hyps, strict=True):
        rec: dict = {"utt_id": u.utt_id, "ref": u.ref, "hyp": h}
        if u.ref:
            rec["lower_errors"] = edit_distance(plain_words(h), plain_words(u.ref))
            if u.cased:
                rec["cased_errors"] = edit_distance(cased_words(h), cased_words(u.ref))
        utterances.append(rec)
    return {
        "n": len(eval_set.utterances),
        "scored": len(scored),
        "minutes": round(eval_set.minutes, 2),
        "cased_wer": cased_wer,
        "cased_errors": cased_err,
        "cased_words": cased_n,
        "cased_utterances": len(cased),
        "lower_wer": lower_wer,
        "lower_errors": lower_err,
        "lower_words": lower_n,
        "groups": groups,
        "utterances": utterances,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x * 100:.2f} %"


def markdown_table(set_name: str, runs: list[dict], chunks: list[float]) -> str:
    """One set's table: rows setting x final pass, columns chunk x (cased, lower) WER."""
    rows: dict[tuple[str, str], dict[float, dict]] = {}
    for run in runs:
        if set_name in run["sets"]:
            rows.setdefault((run["setting"], run["final_pass"]), {})[run["chunk"]] = run["sets"][set_name]
    head = ["setting", "final pass"] + [f"{c:g} s {kind}" for c in chunks for kind in ("cased", "lower")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (setting, final_pass), by_chunk in rows.items():
        cells = [setting, final_pass]
        for c in chunks:
            r = by_chunk.get(c)
            cells += [_pct(r["cased_wer"]) if r else "-", _pct(r["lower_wer"]) if r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- decoding --------------------------------------------------------------------------------------------


async def transcribe(
    model: str, setting: Setting, wavs: list[Path], chunk_s: float, lm: str = "auto", **config: object
) -> dict[str, str]:
    """Each WAV streamed through one engine with this setting; the joined finals per file name. ``lm`` as
    ``CAPTIONS_LM``: a path, ``none``, or ``auto`` (the bundled LM for the bundled model only, so a candidate
    model elsewhere needs the path). ``config``: further ``EngineConfig`` fields."""
    texts = await transcribe_sets(model, setting, [wavs], chunk_s, lm, **config)
    return {w.name: t for w, t in zip(wavs, texts[0], strict=True)}


def engine_config(model: str, setting: Setting, chunk_s: float, lm: str = "auto", **config: object):  # noqa: ANN201
    """The ``EngineConfig`` this tool streams with (as served: 2 s left, 0.56 s right context)."""
    from backend.engine import EngineConfig
    from captions_model.paths import resolve_lm

    lm_path = resolve_lm(model, lm) if setting.lm_alpha > 0 else None
    if setting.lm_alpha > 0 and lm_path is None:
        raise SystemExit(
            f"{setting}: no LM for {model}; pass --lm <path> (e.g. models/captions-embedded-lm.nemo)"
        )
    known = {f.name for f in dataclasses.fields(EngineConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise SystemExit(f"this engine's EngineConfig has no {unknown} (is the final pass merged?)")
    return EngineConfig(
        model=model,
        beam_size=setting.beams,
        lm_path=lm_path,
        lm_alpha=setting.lm_alpha,
        lm_token_bonus=setting.token_bonus,
        allowed_chunk_s=(chunk_s,),
        left_context_s=2.0,
        right_context_s=0.56,
        **config,  # type: ignore[arg-type]
    )


async def transcribe_sets(
    model: str,
    setting: Setting,
    wav_lists: list[list[Path]],
    chunk_s: float,
    lm: str = "auto",
    progress: bool = False,
    timings: list[float] | None = None,
    outcomes: list[dict[str, int]] | None = None,
    **config: object,
) -> list[list[str]]:
    """Every list of WAVs streamed through ONE engine (one stream at a time); the joined finals, in order.
    ``timings``, if given, gets each list's decoding wall seconds (engine start excluded); ``outcomes``, if
    given, each list's second-pass outcome counts (``Engine.stats().final_pass_outcomes``, that list's share;
    empty without a second pass)."""
    from backend.engine import Engine, StreamOptions
    from eval.dataset import read_16k
    from eval.runner import decode_stream

    engine = Engine(engine_config(model, setting, chunk_s, lm, **config))
    await engine.start()
    options = StreamOptions(chunk_s=chunk_s, decoding=setting.decoding)  # type: ignore[arg-type]
    out: list[list[str]] = []
    try:
        for wavs in wav_lists:
            texts = []
            before = dict(engine.stats().final_pass_outcomes)
            t0 = time.monotonic()
            for i, wav in enumerate(wavs):
                texts.append(await decode_stream(engine, read_16k(wav), options))
                if progress and (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{len(wavs)}", flush=True)
            out.append(texts)
            if timings is not None:
                timings.append(time.monotonic() - t0)
            if outcomes is not None:
                after = dict(engine.stats().final_pass_outcomes)
                outcomes.append(
                    {k: n - before.get(k, 0) for k, n in sorted(after.items()) if n - before.get(k, 0)}
                )
    finally:
        await engine.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/captions-embedded.nemo")
    parser.add_argument(
        "--settings",
        nargs="+",
        type=Setting.parse,
        default=[Setting("beam", 8, 0.7, 1.0)],
        help="greedy | beam:<beams>:<lm weight>[:<token bonus>] (default: the service's beam:8:0.7:1)",
    )
    parser.add_argument(
        "--final-pass", type=parse_final_passes, default=["off"], help="comma list: off,decode"
    )
    parser.add_argument(
        "--final-pass-model",
        default=None,
        metavar="PATH",
        help="second-pass model file (EngineConfig.final_pass_model) for the runs other than off "
        "(default: the bundled one)",
    )
    parser.add_argument("--wav", type=Path, nargs="*", default=[])
    parser.add_argument("--manifest", type=Path, nargs="*", default=[], help="NeMo manifests to score")
    parser.add_argument(
        "--chunk", type=float, nargs="+", default=[1.12], help="chunk seconds, e.g. 1.12 0.56"
    )
    parser.add_argument("--limit", type=int, default=0, help="first N utterances of each set (0: all)")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.json (or a .json path)")
    parser.add_argument("--lm", default="auto", help="LM path, none, or auto (the bundled model's LM)")
    parser.add_argument(
        "--int8-encoder", action="store_true", help="the streaming encoder in dynamic int8 (EngineConfig)"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    sets = [read_manifest(m, args.limit) for m in args.manifest]
    if args.wav:
        sets.append(wav_set(args.wav, args.limit))
    sets = unique_names(sets)
    if not sets:
        parser.error("nothing to score: give --manifest and/or --wav")
    missing = [str(u.audio) for s in sets for u in s.utterances if not u.audio.exists()]
    if missing:
        raise SystemExit(f"{len(missing)} audio files missing, e.g. {missing[:3]}")
    for s in sets:
        print(f"{s.name}: {len(s.utterances)} utterances, {s.minutes:.2f} min", flush=True)
    if args.final_pass_model is not None and not Path(args.final_pass_model).exists():
        raise SystemExit(f"--final-pass-model {args.final_pass_model}: no such file")
    results: dict = {"model": args.model, "lm": args.lm, "sets": {s.name: len(s.utterances) for s in sets}}
    if args.int8_encoder:
        results["int8_encoder"] = True
    if args.final_pass_model is not None:
        results["final_pass_model"] = args.final_pass_model
    runs: list[dict] = []
    t_all = time.monotonic()
    for setting in args.settings:
        for final_pass in args.final_pass:
            config: dict[str, object] = {} if final_pass == "off" else {"final_pass": final_pass}
            if args.int8_encoder:
                config["int8_encoder"] = True
            if final_pass != "off" and args.final_pass_model is not None:
                config["final_pass_model"] = args.final_pass_model
            for chunk in args.chunk:
                label = f"[{setting} | final pass {final_pass} | chunk {chunk:g}]"
                print(f"{label} decoding ...", flush=True)
                t0 = time.monotonic()
                timings: list[float] = []
                outcomes: list[dict[str, int]] = []
                hyps = asyncio.run(
                    transcribe_sets(
                        args.model,
                        setting,
                        [[u.audio for u in s.utterances] for s in sets],
                        chunk,
                        args.lm,
                        progress=True,
                        timings=timings,
                        outcomes=outcomes,
                        **config,
                    )
                )
                wall = time.monotonic() - t0
                audio_min = sum(s.minutes for s in sets)
                run = {
                    "setting": str(setting),
                    "final_pass": final_pass,
                    **(
                        {"final_pass_model": config["final_pass_model"]}
                        if "final_pass_model" in config
                        else {}
                    ),
                    "chunk": chunk,
                    "wall_s": round(wall, 1),
                    "audio_min": round(audio_min, 2),
                    "sets": {},
                }
                for s, h, seconds, counts in zip(sets, hyps, timings, outcomes, strict=True):
                    r = score_set(s, h) | {"wall_s": round(seconds, 1)}
                    if final_pass != "off":
                        r["final_pass_outcomes"] = counts
                    run["sets"][s.name] = r
                    print(
                        f"{label} {s.name}: cased {_pct(r['cased_wer'])} ({r['cased_words']} words), "
                        f"lower {_pct(r['lower_wer'])} ({r['lower_words']} words, {r['scored']} utterances), "
                        f"{seconds:.1f} s",
                        flush=True,
                    )
                    if final_pass != "off":
                        print(f"{label} {s.name}: second-pass outcomes {counts}", flush=True)
                    if s.name == "wav":
                        for u, text in zip(s.utterances, h, strict=True):
                            print(f"{label} {u.audio.name}: {text}", flush=True)
                print(
                    f"{label} wall {wall:.1f} s for {audio_min:.2f} min of audio "
                    f"(RTFx {audio_min * 60 / max(wall, 1e-9):.1f})",
                    flush=True,
                )
                runs.append(run)
                results["runs"] = runs
                results["wall_s"] = round(time.monotonic() - t_all, 1)
                write_results(args.out, results)  # after every run: a later failure keeps what was done
    for s in sets:
        print(f"\n### {s.name} ({len(s.utterances)} utterances, {s.minutes:.2f} min)\n")
        print(markdown_table(s.name, runs, args.chunk))
    print(f"\ntotal wall {results['wall_s']:.1f} s")
    if args.out is not None:
        print(f"wrote {results_path(args.out)}")


def results_path(out: Path) -> Path:
    """``--out``: a folder (``results.json`` in it) or a ``.json`` path."""
    return out if out.suffix == ".json" else out / "results.json"


def write_results(out: Path | None, results: dict) -> None:
    if out is None:
        return
    path = results_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
