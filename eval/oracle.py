"""How good could n-best rescoring get? The oracle WER of the first pass's beams at each final (issue 24).

Runs the engine's beam search (the service's settings, one stream per utterance, the global per-meeting list
typed in lower case) and, whenever a final is committed, records the text of every beam. The oracle picks, per
utterance, the beam closest to the reference (utterances committed as one final; those split into several
finals are scored on their best beam per final, joined). Rescoring the n-best cannot do better than this.

Usage::

    python -m eval.oracle --manifest var/eval/set/manifest.json --chunk 1.12
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--lists", type=Path, default=None)
    parser.add_argument("--chunk", type=float, default=1.12)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--biasing", default="global", help="none or a list kind of the set (global)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from backend.config import Settings, engine_config
    from backend.engine import Engine, StreamOptions
    from backend.engine.beam_streams import BeamStreams
    from eval.dataset import load_set
    from eval.metrics import normalize
    from eval.runner import decode_stream, load_audio

    captured: dict[int, list[list[str]]] = defaultdict(list)  # stream id -> per final, every beam's text
    report = BeamStreams._report

    def capturing(self: Any, item: Any, state: Any, delay_frames: int, best: int, lag: int) -> Any:
        beams = [self._text([t.label for t in h]) for h in state.histories]  # before a restart clears them
        output = report(self, item, state, delay_frames, best, lag)
        if output.finals:
            captured[item.stream_id].append([output.finals[0].text, *beams])
        return output

    BeamStreams._report = capturing  # type: ignore[method-assign]
    eval_set = load_set(args.manifest, args.lists, args.limit)
    config = engine_config(Settings(), vocabulary_cache_dir=None, final_pass="off")

    async def run() -> list[tuple[str, list[list[str]]]]:
        engine = Engine(config)
        await engine.start()
        audio = load_audio(eval_set.items)
        out = []
        try:
            for item in eval_set.items:
                list_id = item.lists.get(args.biasing) if args.biasing != "none" else None
                handle = None
                if list_id is not None:
                    handle = await engine.load_vocabulary(eval_set.list_texts(list_id, "typed"))
                stream_id = engine._next_stream_id
                await decode_stream(engine, audio[item.utt_id], StreamOptions(args.chunk, "beam", handle))
                if handle is not None:
                    handle.release()
                out.append((item.text, captured.pop(stream_id, [])))
        finally:
            await engine.stop()
        return out

    results = asyncio.run(run())
    from captions_model.words import edit_distance

    def word_errors(ref: str, hyp: str) -> int:
        return edit_distance(ref.split(), hyp.split())

    errors_best = errors_oracle = words = 0
    beams_seen = 0
    for reference, finals in results:
        ref = normalize(reference)
        best = " ".join(normalize(f[0]) for f in finals if f)
        oracle_parts = []
        for beams in finals:
            beams_seen = max(beams_seen, len(beams) - 1)
            candidates = [normalize(b) for b in beams[1:]] or [""]
            oracle_parts.append(min(candidates, key=lambda c: word_errors(ref, c)))
        oracle = " ".join(oracle_parts)
        words += len(ref.split())
        errors_best += word_errors(ref, best)
        errors_oracle += word_errors(ref, oracle)
    print(
        f"{len(results)} utterances, {words} words, up to {beams_seen} beams: first beam WER "
        f"{100 * errors_best / words:.1f} %, {beams_seen}-best oracle WER "
        f"{100 * errors_oracle / words:.1f} % "
        f"(lower-cased, no punctuation)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
