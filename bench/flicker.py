"""How often the words a caption screen shows change (issue 45): every recording of a manifest streamed into
one engine (1.12 s chunks, beam, service defaults), with the live re-read of the open utterance on and off.

Flicker: of the words a partial showed (all but its last, which is still being heard), the share that the
next partial of the same utterance no longer shows in place (a prefix-aligned word comparison). Printed with
the partials' word counts and the finals' and last partials' WER.

    python bench/flicker.py --manifest var/rooms/degraded/clean/manifest.json --refine 1.5,0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def changed_words(before: str, after: str) -> tuple[int, int]:
    """(words of ``before`` but its last, how many of them ``after`` does not show at the same place)."""
    shown = [w.lower().strip(",.?!") for w in before.split()][:-1]
    now = [w.lower().strip(",.?!") for w in after.split()]
    return len(shown), sum(1 for i, w in enumerate(shown) if i >= len(now) or now[i] != w)


async def run(manifest: Path, refine_s: float) -> tuple[int, int, int]:
    import soundfile as sf

    from backend.engine import Engine, EngineConfig, StreamOptions
    from captions_model.paths import BUNDLED_MODEL_PATH

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    config = EngineConfig(
        model=str(BUNDLED_MODEL_PATH), final_pass="decode", final_pass_refine_partials_s=refine_s
    )
    engine = Engine(config)
    await engine.start()
    shown_total = changed_total = partials = 0
    try:
        for row in rows:
            audio, _ = sf.read(manifest.parent / row["audio_filepath"], dtype="float32")
            stream = engine.open_stream(StreamOptions(chunk_s=1.12, decoding="beam"))
            size = stream.chunk_samples
            padded = np.concatenate([audio, np.zeros(-len(audio) % size, np.float32)])
            previous = ""
            for start in range(0, len(padded), size):
                result = await stream.push(padded[start : start + size])
                if result.finals:
                    previous = ""
                if result.partial:
                    if previous:
                        shown, changed = changed_words(previous, result.partial)
                        shown_total, changed_total = shown_total + shown, changed_total + changed
                    previous, partials = result.partial, partials + 1
            await stream.finish()
    finally:
        await engine.stop()
    return partials, shown_total, changed_total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifest", type=Path, action="append", required=True)
    parser.add_argument("--refine", default="1.5,0", help="re-read intervals to compare, seconds (0: off)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print("| manifest | re-read every s | partials | words shown again | changed | flicker % |")
    print("|---|---|---|---|---|---|")
    for manifest in args.manifest:
        for refine_s in (float(r) for r in args.refine.split(",")):
            partials, shown, changed = asyncio.run(run(manifest, refine_s))
            rate = 100.0 * changed / max(shown, 1)
            name = manifest.parent.name
            print(f"| {name} | {refine_s:g} | {partials} | {shown} | {changed} | {rate:.1f} |", flush=True)


if __name__ == "__main__":
    main()
