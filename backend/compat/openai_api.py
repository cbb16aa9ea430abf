"""OpenAI-compatible file transcription (issue 47): ``POST /v1/audio/transcriptions``, ``GET /v1/models``,
and ``POST /v1/audio/translations`` (refused: the model is English only). Errors in OpenAI's shape, so
the OpenAI client libraries raise their own typed errors. Auth: ``Authorization: Bearer <our API token>``.

A recording is decoded with PyAV (``backend.compat.media``) and transcribed through the live engine
(``backend.compat.files``). The extension field ``keyterms`` (repeated, or comma-separated) is a
vocabulary for this request alone, validated like a session's terms. See docs/protocol.md."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from backend.api.deps import Principal, require_user, services
from backend.compat.files import Segment, TermsRejected, check_terms, transcribe_samples
from backend.compat.media import MediaError, decode_audio
from backend.edge.errors import ApiError, openai_error_response
from backend.services import EngineUnavailable, Services
from backend.text.captions_export import Cue, render_captions
from backend.text.vocab import EffectiveVocabulary
from backend.text.written_form import to_written

MODEL_ID = "captions-en"
"""Our model's id in ``/v1/models``: the bundled streaming Transducer with Whisper's second pass."""
MODEL_ALIASES = frozenset({MODEL_ID, "whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"})
"""``model`` values accepted (clients hard-code OpenAI's names); each is decoded by the one model."""
FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
GRANULARITIES = ("segment", "word")
MAX_FIELD_BYTES = 64 * 1024
"""Largest non-file form field (a prompt, the keyterms), bytes."""

Handler = Callable[[Request], Awaitable[Response]]


def _openai_errors(handler: Handler) -> Handler:
    """Render every typed error of ``handler`` in OpenAI's shape."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return openai_error_response(exc)
        except EngineUnavailable as exc:
            return openai_error_response(ApiError(503, "engine_unavailable", str(exc)))

    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


def invalid(param: str, message: str, code: str = "invalid_value", status: int = 400) -> ApiError:
    return ApiError(status, code, message, [{"field": param}])


async def _caller(request: Request) -> Principal:
    if not request.headers.get("authorization") and not request.cookies:
        raise ApiError(401, "invalid_api_key", "missing API key: send Authorization: Bearer <API token>")
    try:
        return await require_user(request)
    except ApiError as exc:
        if exc.status == 401:
            raise ApiError(401, "invalid_api_key", exc.message) from exc
        raise


async def list_models(request: Request) -> Response:
    """The models ``/v1/audio/transcriptions`` accepts (OpenAI's list shape).
    ---
    tags: [compat]
    responses: {200: {description: "{object: list, data: [{id, object: model, created, owned_by}]}"}}
    """
    await _caller(request)
    data = [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "captions"}]
    return JSONResponse({"object": "list", "data": data})


async def translations(request: Request) -> Response:
    """Not supported: the model transcribes English only.
    ---
    tags: [compat]
    responses: {400: {description: "OpenAI error, code unsupported_endpoint"}}
    """
    await _caller(request)
    raise ApiError(400, "unsupported_endpoint", "translations are not supported: the model is English only")


async def transcriptions(request: Request) -> Response:
    """Transcribe an uploaded recording (multipart: file, model, response_format, language, prompt,
    temperature, timestamp_granularities[], keyterms).
    ---
    tags: [compat]
    responses: {200: {description: "the transcript in response_format"},
      400: {description: "OpenAI error naming the param"}, 401: {description: "no valid API token"},
      413: {description: "over max_recording_bytes or max_recording_s"}, 415: {description: "not audio"}}
    """
    principal = await _caller(request)
    svc = services(request)
    async with request.form(max_files=1, max_fields=64, max_part_size=MAX_FIELD_BYTES) as form:
        options = _options(form)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise invalid("file", "file: required (multipart upload of the recording)", "missing_file")
        data = await upload.read()
    terms = await _terms(svc, options["keyterms"])
    samples = await decode_upload(data, svc.settings.max_recording_s)
    del data
    settings = svc.settings
    if not svc.hub.slots.try_take(principal.user_id, settings.max_sessions, settings.max_sessions_per_user):
        raise ApiError(
            429, "rate_limit_exceeded", "too many streams and transcriptions at once; retry shortly"
        )
    try:
        segments = await transcribe_samples(svc, samples, EffectiveVocabulary.from_terms(terms))
    finally:
        svc.hub.slots.release(principal.user_id)
    return render(options, segments, len(samples) / 16000)


async def decode_upload(data: bytes, max_audio_s: float) -> Any:
    """The upload as 16 kHz samples (off the event loop), or the typed error that says why not."""
    try:
        return await asyncio.to_thread(decode_audio, data, max_audio_s)
    except MediaError as exc:
        code = {415: "unsupported_media_type", 413: "audio_too_long"}.get(exc.status, "invalid_audio")
        raise ApiError(exc.status, code, str(exc), [{"field": "file"}]) from exc


async def _terms(svc: Services, items: list[str]) -> list[Any]:
    try:
        return await check_terms(svc, items)
    except TermsRejected as exc:
        rejected = [e.as_dict("index") for e in exc.errors]
        raise ApiError(400, "invalid_terms", str(exc), [{"field": "keyterms", "terms": rejected}]) from exc


def _one(form: FormData, name: str) -> str | None:
    values = form.getlist(name)
    if len(values) > 1:
        raise invalid(name, f"{name}: given more than once")
    if not values:
        return None
    if not isinstance(values[0], str):
        raise invalid(name, f"{name}: expected a text field")
    return values[0]


def _options(form: FormData) -> dict[str, Any]:
    model = _one(form, "model")
    if model is None:
        raise invalid("model", "model: required", "missing_model")
    if model not in MODEL_ALIASES:
        raise invalid(
            "model",
            f"model {model!r} does not exist; GET /v1/models lists {MODEL_ID!r}",
            "model_not_found",
            404,
        )
    fmt = _one(form, "response_format") or "json"
    if fmt not in FORMATS:
        raise invalid("response_format", f"response_format must be one of {', '.join(FORMATS)}")
    language = _one(form, "language")
    if language is not None and language.lower().split("-")[0] != "en":
        raise invalid(
            "language", f"language {language!r} is not supported: English (en) only", "unsupported_language"
        )
    _temperature(_one(form, "temperature"))
    if (_one(form, "stream") or "false").lower() != "false":
        raise invalid("stream", "stream: streamed transcriptions are not supported; use /v1/listen")
    granularities = [*form.getlist("timestamp_granularities[]"), *form.getlist("timestamp_granularities")]
    for granularity in granularities:
        if granularity not in GRANULARITIES:
            raise invalid("timestamp_granularities", "timestamp_granularities: segment or word")
    if granularities and fmt != "verbose_json":
        raise invalid("timestamp_granularities", "timestamp_granularities needs response_format verbose_json")
    _one(form, "prompt")  # accepted; the model takes no prompt (use keyterms)
    keyterms = [
        part.strip()
        for value in (*form.getlist("keyterms"), *form.getlist("keyterms[]"))
        if isinstance(value, str)
        for part in value.split(",")
        if part.strip()
    ]
    return {"format": fmt, "granularities": set(granularities) or {"segment"}, "keyterms": keyterms}


def _temperature(raw: str | None) -> None:
    if raw is None:
        return
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise invalid("temperature", "temperature: a number from 0 to 1")


def written(segment: Segment) -> str:
    """A segment as OpenAI's models write: numbers, dates and units in written form, terms untouched."""
    return to_written(segment.text, segment.matched_terms)


def render(options: dict[str, Any], segments: list[Segment], duration_s: float) -> Response:
    """The transcript in the requested ``response_format``."""
    texts = [written(s) for s in segments]
    text = " ".join(texts)
    fmt = options["format"]
    if fmt == "text":
        return PlainTextResponse(text + "\n")
    if fmt in ("srt", "vtt"):
        cues = [Cue(s.start_s, s.end_s, t) for s, t in zip(segments, texts, strict=True)]
        body, media_type = render_captions(fmt, cues)
        return Response(body, media_type=media_type)
    if fmt == "json":
        return JSONResponse({"text": text})
    verbose: dict[str, Any] = {
        "task": "transcribe",
        "language": "english",
        "duration": round(duration_s, 3),
        "text": text,
    }
    if "segment" in options["granularities"]:
        verbose["segments"] = [
            {
                "id": i,
                "seek": 0,
                "start": s.start_s,
                "end": s.end_s,
                "text": t,
                "tokens": [],
                "temperature": 0.0,
                "avg_logprob": 0.0,
                "compression_ratio": 1.0,
                "no_speech_prob": 0.0,
            }
            for i, (s, t) in enumerate(zip(segments, texts, strict=False))
        ]
    if "word" in options["granularities"]:
        verbose["words"] = [
            {"word": w.text, "start": w.start_s, "end": w.end_s} for s in segments for w in s.words
        ]
    return JSONResponse(verbose)


routes = [
    Route("/v1/models", _openai_errors(list_models), methods=["GET"]),
    Route("/v1/audio/transcriptions", _openai_errors(transcriptions), methods=["POST"]),
    Route("/v1/audio/translations", _openai_errors(translations), methods=["POST"]),
]
