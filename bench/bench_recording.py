"""A long recording uploaded to a meeting (issue 47): how fast it becomes the meeting's transcript.

Starts a real server (uvicorn, the bundled model, the second pass, SQLite), creates a meeting whose
vocabulary holds the terms below, and uploads ``--minutes`` of espeak-ng speech (sentences that use those
terms, with pauses between them) as an MP3 to ``POST /api/meetings/{id}/recordings``; polls the job until
it is done. Prints, as JSON, the recording's length, the wall time from upload to done, the real-time
factor (audio seconds per wall second), the word error rate of the transcript against the script, and how
many of the spoken terms the transcript spells as listed (per term: [spoken, spelled]). The WER is
of the written form ("Dr." for "doctor" counts as an error), lower-cased, without punctuation.

    .venv/bin/python bench/bench_recording.py               # 10 minutes of audio
    .venv/bin/python bench/bench_recording.py --minutes 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from captions_model.words import edit_distance  # noqa: E402
from tests.support.media import encoded  # noqa: E402
from tests.support.server import LiveServer, login, make_settings  # noqa: E402
from tests.support.speech import spoken  # noqa: E402

TERMS = ["Kowalczyk", "tocilizumab", "Novartis", "Okonkwo", "adalimumab", "Brightwater"]
SENTENCES = [
    "Please send the report to doctor Kowalczyk before noon.",
    "The patient started tocilizumab last week and feels better.",
    "Revenue from Novartis grew in the third quarter.",
    "Mister Okonkwo will present the budget after lunch.",
    "We switched her to adalimumab because of the side effects.",
    "The Brightwater plant reopens in the spring.",
    "Blood pressure is stable and the wound is healing well.",
    "We will review the medication again tomorrow morning.",
    "The board approved the plan without changes.",
    "Our customers asked for faster delivery and lower prices.",
]


def script_audio(minutes: float, work: Path) -> tuple[np.ndarray, list[str]]:
    """Sentences cycled until ``minutes`` of audio (each already padded with pauses), and their text."""
    voiced = [spoken(s, work) for s in SENTENCES]
    pieces: list[np.ndarray] = []
    said: list[str] = []
    total = 0
    while total < minutes * 60 * 16000:
        i = len(said) % len(SENTENCES)
        pieces.append(voiced[i])
        said.append(SENTENCES[i])
        total += len(voiced[i])
    return np.concatenate(pieces), said


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--decoding", choices=["beam", "greedy"], default="beam")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        audio, said = script_audio(args.minutes, tmp)
        upload = encoded(audio)
        settings = make_settings(tmp, default_decoding=args.decoding)
        with LiveServer(settings) as server:
            client = login(server.base_url)
            client.timeout = 120
            vocabulary = client.post("/api/vocabularies", json={"name": "bench"}).json()["vocabulary"]
            added = client.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": TERMS})
            assert added.status_code == 200, added.text
            body = {"title": "Recorded review", "vocabulary_ids": [vocabulary["id"]]}
            meeting_id = client.post("/api/meetings", json=body).json()["meeting"]["id"]
            started = time.monotonic()
            accepted = client.post(
                f"/api/meetings/{meeting_id}/recordings", files={"file": ("review.mp3", upload, "audio/mpeg")}
            )
            assert accepted.status_code == 202, accepted.text
            job = accepted.json()["recording"]
            while job["status"] not in ("done", "failed"):
                time.sleep(0.5)
                job = client.get(f"/api/meetings/{meeting_id}/recordings/{job['id']}").json()["recording"]
            wall_s = time.monotonic() - started
            assert job["status"] == "done", job
            captions = client.get(f"/api/meetings/{meeting_id}/captions").json()["captions"]
            transcript = " ".join(c["text"] for c in captions)
    reference, hypothesis = words(" ".join(said)), words(transcript)
    spoken_terms = sum(s.count(t) for s in said for t in TERMS)
    spelled = sum(transcript.count(t) for t in TERMS)
    print(
        json.dumps(
            {
                "audio_s": round(len(audio) / 16000, 1),
                "upload_bytes": len(upload),
                "decoding": args.decoding,
                "wall_s": round(wall_s, 1),
                "real_time_factor": round(len(audio) / 16000 / wall_s, 2),
                "finals": job["finals"],
                "wer": round(edit_distance(reference, hypothesis) / len(reference), 4),
                "terms_spoken": spoken_terms,
                "terms_spelled_as_listed": spelled,
                "per_term": {t: [sum(s.count(t) for s in said), transcript.count(t)] for t in TERMS},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
