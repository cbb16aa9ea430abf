"""The OpenAI-compatible file transcription route (issue 47), driven by the unmodified ``openai`` client
against a real server with the bundled model."""

from __future__ import annotations

import io

import httpx
import numpy as np
import openai
import pytest

from tests.compat.conftest import OTHER_TERM, TERM
from tests.support.media import encoded, wav_bytes
from tests.support.server import LiveServer

pytestmark = pytest.mark.slow


def client(server: LiveServer, token: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=token, base_url=server.base_url + "/v1", max_retries=0, timeout=120)


def transcribe(api: openai.OpenAI, data: bytes, name: str, **options: object) -> object:
    return api.audio.transcriptions.create(model="whisper-1", file=(name, io.BytesIO(data)), **options)


@pytest.mark.parametrize("kind", ["wav", "mp3"])
def test_the_openai_client_transcribes_wav_and_mp3_in_each_format(
    real_server: LiveServer, api_token: str, speech: np.ndarray, kind: str
) -> None:
    data = wav_bytes(speech) if kind == "wav" else encoded(speech, "mp3", "libmp3lame")
    api = client(real_server, api_token)
    as_json = transcribe(api, data, f"speech.{kind}", response_format="json")
    assert "send the report" in as_json.text, as_json.text
    text = transcribe(api, data, f"speech.{kind}", response_format="text")
    assert isinstance(text, str) and "report" in text
    srt = transcribe(api, data, f"speech.{kind}", response_format="srt")
    assert srt.startswith("1\n00:00:0") and " --> " in srt and "report" in srt
    vtt = transcribe(api, data, f"speech.{kind}", response_format="vtt")
    assert vtt.startswith("WEBVTT") and "report" in vtt


def test_keyterms_boost_a_name_the_plain_decode_misses(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    api = client(real_server, api_token)
    data = wav_bytes(speech)
    plain = transcribe(api, data, "speech.wav")
    assert TERM not in plain.text, plain.text
    boosted = transcribe(api, data, "speech.wav", extra_body={"keyterms": f"{OTHER_TERM},{TERM}"})
    assert TERM in boosted.text, boosted.text
    assert TERM not in transcribe(api, data, "speech.wav").text  # the vocabulary was this request's alone


def test_verbose_json_has_segments_and_word_times(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    api = client(real_server, api_token)
    verbose = transcribe(
        api,
        wav_bytes(speech),
        "speech.wav",
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert verbose.language == "english" and abs(verbose.duration - len(speech) / 16000) < 0.01
    assert verbose.segments and verbose.segments[0].start < verbose.segments[0].end
    words = [w.word for w in verbose.words]
    assert "report" in " ".join(words).lower()
    assert all(a.start <= b.start for a, b in zip(verbose.words, verbose.words[1:], strict=False))


def test_models_and_translations(real_server: LiveServer, api_token: str) -> None:
    api = client(real_server, api_token)
    assert [m.id for m in api.models.list()] == ["captions-en"]
    with pytest.raises(openai.BadRequestError) as refused:
        api.audio.translations.create(model="whisper-1", file=("a.wav", io.BytesIO(b"x")))
    assert refused.value.code == "unsupported_endpoint"


def test_bad_requests_are_typed_openai_errors_and_the_server_keeps_serving(
    real_server: LiveServer, api_token: str, speech: np.ndarray
) -> None:
    api = client(real_server, api_token)
    data = wav_bytes(speech)
    with pytest.raises(openai.AuthenticationError):
        transcribe(client(real_server, "not-a-token"), data, "speech.wav")
    anonymous = httpx.post(
        real_server.base_url + "/v1/audio/transcriptions",
        files={"file": ("a.wav", data)},
        data={"model": "whisper-1"},
    )
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "invalid_api_key"

    def refused(expected: type[openai.APIStatusError], payload: bytes, **options: object) -> dict:
        with pytest.raises(expected) as error:
            transcribe(api, payload, "speech.wav", **options)
        return error.value.body

    assert refused(openai.BadRequestError, data, language="fr")["param"] == "language"
    assert refused(openai.BadRequestError, data, response_format="docx")["param"] == "response_format"
    assert refused(openai.BadRequestError, data, temperature=3)["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        api.audio.transcriptions.create(model="dall-e", file=("a.wav", io.BytesIO(data)))
    bad_term = refused(openai.BadRequestError, data, extra_body={"keyterms": "ok,bad\u0007"})
    assert bad_term["code"] == "invalid_terms" and "bad" in bad_term["message"]
    assert "control character" in bad_term["message"]
    assert bad_term["param"] == "keyterms"
    many = refused(openai.BadRequestError, data, extra_body={"keyterms": ",".join(f"t{i}" for i in range(6))})
    assert many["code"] == "invalid_terms" and "at most 5" in many["message"]
    assert refused(openai.APIStatusError, b"this is not audio at all")["code"] == "unsupported_media_type"
    truncated = encoded(speech, "flac", "flac")[:300] + bytes(range(256)) * 8  # a FLAC header, then junk
    assert refused(openai.BadRequestError, truncated)["code"] == "invalid_audio"
    big = data + bytes(400_000)
    assert refused(openai.APIStatusError, big)["code"] == "too_large"
    long_audio = encoded(np.zeros(16000 * 31, np.float32), bit_rate=32_000)  # small, but 31 s
    assert refused(openai.APIStatusError, long_audio)["code"] == "audio_too_long"
    assert "report" in transcribe(api, data, "speech.wav").text  # still serving
