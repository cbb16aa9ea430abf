"""A meeting's recordings (issue 47): an uploaded recording becomes the meeting's transcript, decoded with
the meeting's vocabulary, its progress readable while it runs."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from tests.compat.conftest import TERM
from tests.support.media import encoded, wav_bytes
from tests.support.server import LiveServer

pytestmark = pytest.mark.slow


def api(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"authorization": f"Bearer {token}"}, timeout=60)


def meeting_with_term(client: httpx.Client) -> int:
    vocabulary = client.post("/api/vocabularies", json={"name": "names"}).json()["vocabulary"]
    assert (
        client.post(f"/api/vocabularies/{vocabulary['id']}/terms", json={"terms": [TERM]}).status_code == 200
    )
    body = {"title": "Recorded ward round", "vocabulary_ids": [vocabulary["id"]]}
    return client.post("/api/meetings", json=body).json()["meeting"]["id"]


def test_an_uploaded_recording_becomes_the_meetings_transcript(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    client = api(real_server, api_token)
    meeting_id = meeting_with_term(client)
    recording = np.concatenate([speech, speech])
    files = {"file": ("round.mp3", encoded(recording), "audio/mpeg")}
    accepted = client.post(f"/api/meetings/{meeting_id}/recordings", files=files)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()["recording"]
    assert job["status"] in ("queued", "decoding") and job["duration_s"] == pytest.approx(12, abs=1)
    seen = []
    deadline = time.monotonic() + 60
    while job["status"] not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(f"/api/meetings/{meeting_id}/recordings/{job['id']}").json()["recording"]
        seen.append(job["progress"])
    assert job["status"] == "done", job
    assert job["progress"] == 1.0 and job["finals"] >= 2 and seen == sorted(seen)
    listed = client.get(f"/api/meetings/{meeting_id}/recordings").json()["recordings"]
    assert [j["id"] for j in listed] == [job["id"]]
    text = client.get(f"/api/meetings/{meeting_id}/captions?format=text").text
    assert text.count(TERM) == 2, text  # the meeting's vocabulary boosted it
    meeting = client.get(f"/api/meetings/{meeting_id}").json()["meeting"]
    assert meeting["status"] == "ended"


def test_recordings_refuse_what_they_cannot_transcribe(real_server: LiveServer, api_token: str) -> None:
    client = api(real_server, api_token)
    meeting_id = meeting_with_term(client)
    path = f"/api/meetings/{meeting_id}/recordings"
    not_audio = client.post(path, files={"file": ("notes.txt", b"just some text", "text/plain")})
    assert not_audio.status_code == 415 and not_audio.json()["error"]["code"] == "unsupported_media_type"
    too_big = client.post(path, files={"file": ("big.wav", wav_bytes(np.zeros(16000 * 13, np.float32)))})
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "too_large"
    assert client.post(path, data={"x": "1"}).status_code == 422
    assert client.post("/api/meetings/99999/recordings", files={"file": ("a.wav", b"x")}).status_code == 404
    anonymous = httpx.post(real_server.base_url + path, files={"file": ("a.wav", b"x")})
    assert anonymous.status_code == 401
