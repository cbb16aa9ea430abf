"""Multi-condition copies of a training manifest: the synthetic speech in rooms, noise, other talkers, phone
lines, codecs, levels and speeds (issue 45 step 3).

Each utterance gets one independent draw (from ``(seed, utterance id)``, so the result does not depend on
the manifest's order):

- with probability ``--clean`` it keeps its audio (only the gain below), so clean speech stays in the mix;
- otherwise a chain, each link drawn on its own:

  * speed 0.9-1.1 (p 0.5; resampled, so tempo and pitch move together);
  * a room (p 0.5): one of a bank of pyroomacoustics shoeboxes from 3 x 3 x 2.4 m to 10 x 8 x 4 m, RT60
    0.2-1.0 s, the talker 0.5-4 m from the microphone;
  * additive noise (p 0.7) at 0-25 dB SNR (over the speech's active frames): white, pink, brown, fan and
    office noise; or babble of 1-5 *other utterances of the same manifest* (never the evaluation babble) at
    5-25 dB;
  * a channel (p 0.3): a telephone line (band-pass 300-3400 Hz with a drawn edge, 8 kHz, 8-bit mu-law) or a
    lossy codec (MP3 at 16-32 kbit/s, or Ogg Vorbis at its lowest quality);
- then a gain of -30 to +6 dB relative to a -3 dBFS peak, clipped at full scale (loud speech clips).

Nothing here reads the real recordings: the evaluation's degraded copies (``python -m eval degrade``) are
made from those, with their own fixed parameters.

Usage::

    python -m training.augment --manifest training/work/train/manifest_u0.json \
        --out training/work/train_mc --seed 0 --clean 0.2 --workers 2
"""

from __future__ import annotations

import argparse
import io
import json
import os
import zlib
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly
from tqdm import tqdm

from eval.degrade import coloured_noise, fan_noise, in_room, mix_at_snr, phone, room_impulse_response

SAMPLE_RATE = 16000
ROOMS = 48  # impulse responses in the bank (drawn once per run; pyroomacoustics is slow for large RT60)
NOISE_KINDS = ("white", "pink", "brown", "fan", "babble")
P_SPEED, P_ROOM, P_NOISE, P_CHANNEL = 0.5, 0.5, 0.7, 0.3
SNR_DB = (0.0, 25.0)
BABBLE_SNR_DB = (5.0, 25.0)  # other talkers as loud as the talker leave no one answer to learn
GAIN_DB = (-30.0, 6.0)


def rng_for(seed: int, utt_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(utt_id.encode())])


def room_bank(seed: int, n: int = ROOMS) -> list[np.ndarray]:
    """``n`` impulse responses of random shoebox rooms (see the module's docstring), each cut at its RT60."""
    rng = np.random.default_rng([seed, 7])
    bank = []
    for _ in range(n):
        room = (rng.uniform(3, 10), rng.uniform(3, 8), rng.uniform(2.4, 4))
        room = (max(room[0], room[1]), min(room[0], room[1]), room[2])
        rt60 = float(rng.uniform(0.2, 1.0))
        rir = room_impulse_response(rng, room, rt60, (0.5, 4.0))
        bank.append(rir[: round(rt60 * SAMPLE_RATE)].astype(np.float32))
    return bank


def change_speed(audio: np.ndarray, factor: float) -> np.ndarray:
    """``audio`` played ``factor`` times faster (resampled by ``factor`` rounded to 0.01)."""
    return resample_poly(audio, 100, round(100 * factor)).astype(np.float32)


def telephone(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``eval.degrade.phone`` with a drawn band: 200-400 Hz to 3000-3500 Hz."""
    return phone(audio, rng, (rng.uniform(200, 400), rng.uniform(3000, 3500)))


def lossy_codec(audio: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """A round trip through MP3 (16-32 kbit/s) or Ogg Vorbis (lowest quality), by libsndfile."""
    buf = io.BytesIO()
    peak = float(np.abs(audio).max()) or 1.0
    if rng.random() < 0.5:
        sf.write(
            buf,
            audio / peak * 0.9,
            SAMPLE_RATE,
            format="MP3",
            subtype="MPEG_LAYER_III",
            compression_level=float(rng.uniform(0.6, 1.0)),
            bitrate_mode="CONSTANT",
        )
        name = "mp3"
    else:
        sf.write(buf, audio / peak * 0.9, SAMPLE_RATE, format="OGG", subtype="VORBIS", compression_level=1.0)
        name = "vorbis"
    buf.seek(0)
    out, _ = sf.read(buf, dtype="float32")
    out = np.asarray(out[: len(audio)], np.float32) * (peak / 0.9)
    return np.pad(out, (0, len(audio) - len(out))), name


def noise_of(kind: str, n: int, rng: np.random.Generator, others: list[np.ndarray]) -> np.ndarray:
    if kind == "white":
        return rng.standard_normal(n)
    if kind == "pink":
        return coloured_noise(rng, n, 1)
    if kind == "brown":
        return coloured_noise(rng, n, 2)
    if kind == "fan":
        return fan_noise(rng, n)
    talkers = np.zeros(n)
    for _ in range(int(rng.integers(1, 6))):
        other = others[int(rng.integers(len(others)))]
        track = np.tile(other, n // len(other) + 2)
        start = int(rng.integers(0, len(other)))
        piece = track[start : start + n].astype(np.float64)
        talkers += piece / (np.sqrt(np.mean(piece**2)) or 1.0)
    return talkers


def degrade_one(
    audio: np.ndarray,
    rng: np.random.Generator,
    clean: float,
    rooms: list[np.ndarray],
    others: list[np.ndarray],
) -> tuple[np.ndarray, list[str]]:
    """One draw of the chain of the module's docstring: the new audio and what was done (for the manifest)."""
    done: list[str] = []
    audio = audio.astype(np.float32)
    if rng.random() >= clean:
        if rng.random() < P_SPEED:
            factor = float(rng.uniform(0.9, 1.1))
            audio = change_speed(audio, factor)
            done.append(f"speed{factor:.2f}")
        if rng.random() < P_ROOM:
            k = int(rng.integers(len(rooms)))
            audio = in_room(audio, rooms[k], len(rooms[k]) // 2)
            done.append(f"room{k}")
        if rng.random() < P_NOISE and np.abs(audio).max() > 0:
            kind = NOISE_KINDS[int(rng.integers(len(NOISE_KINDS)))]
            snr = float(rng.uniform(*(BABBLE_SNR_DB if kind == "babble" else SNR_DB)))
            audio = mix_at_snr(audio, noise_of(kind, len(audio), rng, others), snr)
            done.append(f"{kind}{snr:.0f}dB")
        if rng.random() < P_CHANNEL:
            if rng.random() < 0.6:
                audio = telephone(audio, rng)
                done.append("phone")
            else:
                audio, name = lossy_codec(audio, rng)
                done.append(name)
    gain = float(rng.uniform(*GAIN_DB))
    peak = float(np.abs(audio).max()) or 1.0
    audio = np.clip(audio / peak * 10 ** ((gain - 3) / 20), -1.0, 1.0).astype(np.float32)
    done.append(f"gain{gain:+.0f}dB")
    return audio, done


_STATE: dict[str, Any] = {}


def _init(seed: int, clean: float, rooms: list[np.ndarray], others: list[np.ndarray], out: str) -> None:
    _STATE.update(seed=seed, clean=clean, rooms=rooms, others=others, out=Path(out))


def _one(entry: dict[str, Any]) -> dict[str, Any]:
    from training.features import read_16k_file

    utt_id = Path(entry["audio_filepath"]).stem
    wav = _STATE["out"] / "wav" / f"{utt_id}.wav"
    rng = rng_for(_STATE["seed"], utt_id)
    audio, done = degrade_one(
        read_16k_file(entry["audio_filepath"]), rng, _STATE["clean"], _STATE["rooms"], _STATE["others"]
    )
    sf.write(str(wav), audio, SAMPLE_RATE, subtype="PCM_16")
    return {
        **entry,
        "audio_filepath": str(wav),
        "duration": round(len(audio) / SAMPLE_RATE, 3),
        "augment": "+".join(done),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clean", type=float, default=0.2, help="share of utterances left clean")
    parser.add_argument("--babble-pool", type=int, default=200, help="utterances the babble is drawn from")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rooms", type=int, default=ROOMS, help="impulse responses in the room bank")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    entries = [json.loads(line) for m in args.manifest for line in m.read_text().splitlines() if line.strip()]
    pool_rng = np.random.default_rng([args.seed, 11])
    from training.features import read_16k_file

    picked = pool_rng.permutation(len(entries))[: args.babble_pool]
    others = [read_16k_file(entries[i]["audio_filepath"]) for i in picked]  # read once, for every worker
    (args.out / "wav").mkdir(parents=True, exist_ok=True)
    rooms = room_bank(args.seed, args.rooms)
    with Pool(args.workers, _init, (args.seed, args.clean, rooms, others, str(args.out))) as pool:
        lines = list(tqdm(pool.imap(_one, entries, chunksize=16), total=len(entries), desc="augment"))
    name = "manifest_" + "_".join(m.stem.removeprefix("manifest_") for m in args.manifest) + ".json"
    (args.out / name).write_text("".join(json.dumps(e) + "\n" for e in lines))
    print(f"wrote {args.out / name}: {len(lines)} utterances")


if __name__ == "__main__":
    main()
