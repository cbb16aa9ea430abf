"""Real human speech through the engine, as the server streams it, for several decoding settings.

The only real speech available offline is ~87 s shipped in the ``moonshine-voice`` wheel. Two of its files
read published texts (Dickens' opening of *A Tale of Two Cities*, Beckett's "Ever tried. Ever failed...")
whose words are known, so their WER can be measured (lower-cased, punctuation removed: the readings'
punctuation is not known). The other files are transcribed without a score.

Each setting is ``greedy`` or ``beam:<beams>:<lm weight>[:<token bonus>]`` (weight 0: no LM; the bonus is
``EngineConfig.lm_token_bonus``). Every WAV is streamed in
chunks of ``--chunk`` seconds through ``backend.engine`` (buffered: 2 s left, 0.56 s right, as served);
the finals are joined. ``--manifest`` adds NeMo manifests (e.g. the synthetic held-out test sets), scored
cased and punctuated like ``training/evaluate.py``, through the same engine path.

Usage::

    W=.venv/lib/python3.11/site-packages/moonshine_voice/assets
    python -m training.real_speech --model models/captions-embedded.nemo \
        --settings greedy beam:4:0.7 beam:8:0.7 beam:8:0 --wav $W/two_cities.wav $W/beckett.wav
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path

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


def plain_words(text: str) -> list[str]:
    """Lower-cased words without punctuation (apostrophes kept)."""
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def pooled_wer(hyps: dict[str, str]) -> tuple[float, int]:
    """WER over the files that have a reference, pooled by words; and the reference word count."""
    from nemo.collections.asr.metrics.wer import word_error_rate

    names = sorted(n for n in hyps if n in REFERENCES)
    if not names:
        return float("nan"), 0
    refs = [" ".join(plain_words(REFERENCES[n])) for n in names]
    return word_error_rate([" ".join(plain_words(hyps[n])) for n in names], refs), sum(
        len(r.split()) for r in refs
    )


async def transcribe(
    model: str, setting: Setting, wavs: list[Path], chunk_s: float, lm: str = "auto", **config: object
) -> dict[str, str]:
    """Each WAV streamed through one engine with this setting; the joined finals per file name. ``lm`` as
    ``CAPTIONS_LM``: a path, ``none``, or ``auto`` (the bundled LM for the bundled model only, so a candidate
    model elsewhere needs the path). ``config``: further ``EngineConfig`` fields."""
    from backend.engine import Engine, EngineConfig, StreamOptions
    from captions_model.paths import resolve_lm
    from eval.dataset import read_16k
    from eval.runner import decode_stream

    lm_path = resolve_lm(model, lm) if setting.lm_alpha > 0 else None
    if setting.lm_alpha > 0 and lm_path is None:
        raise SystemExit(
            f"{setting}: no LM for {model}; pass --lm <path> (e.g. models/captions-embedded-lm.nemo)"
        )
    engine = Engine(
        EngineConfig(
            model=model,
            beam_size=setting.beams,
            lm_path=lm_path,
            lm_alpha=setting.lm_alpha,
            lm_token_bonus=setting.token_bonus,
            allowed_chunk_s=(chunk_s,),
            left_context_s=2.0,
            right_context_s=0.56,
            **config,
        )
    )
    await engine.start()
    options = StreamOptions(chunk_s=chunk_s, decoding=setting.decoding)  # type: ignore[arg-type]
    texts: dict[str, str] = {}
    try:
        for wav in wavs:
            texts[wav.name] = await decode_stream(engine, read_16k(wav), options)
    finally:
        await engine.stop()
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/captions-embedded.nemo")
    parser.add_argument("--settings", nargs="+", type=Setting.parse, default=[Setting("greedy")])
    parser.add_argument("--wav", type=Path, nargs="*", default=[])
    parser.add_argument("--manifest", type=Path, nargs="*", default=[], help="NeMo manifests to score")
    parser.add_argument("--chunk", type=float, default=1.12)
    parser.add_argument("--out", type=Path, default=None, help="write transcripts and WER (JSON) here")
    parser.add_argument("--lm", default="auto", help="LM path, none, or auto (the bundled model's LM)")
    args = parser.parse_args()
    import torch
    from nemo.collections.asr.metrics.wer import word_error_rate

    torch.set_num_threads(1)
    results = []
    manifests = {
        m: [json.loads(line) for line in m.read_text().splitlines() if line.strip()] for m in args.manifest
    }
    for setting in args.settings:
        row: dict = {"setting": str(setting)}
        if args.wav:
            texts = asyncio.run(transcribe(args.model, setting, args.wav, args.chunk, args.lm))
            wer, words = pooled_wer(texts)
            for name, text in texts.items():
                print(f"[{setting}] {name}: {text}", flush=True)
            print(f"[{setting}] WER {wer * 100:.1f} % over {words} reference words", flush=True)
            row |= {"wer": wer, "words": words, "texts": texts}
        for path, entries in manifests.items():
            wavs = [Path(e["audio_filepath"]) for e in entries]
            texts = asyncio.run(transcribe(args.model, setting, wavs, args.chunk, args.lm))
            wer = word_error_rate([texts[w.name] for w in wavs], [e["text"] for e in entries])
            print(f"[{setting}] {path}: cased WER {wer * 100:.2f} % ({len(entries)} utterances)", flush=True)
            row[str(path)] = wer
        results.append(row)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
