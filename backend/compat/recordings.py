"""A meeting's recordings (issue 47): the organiser uploads a recording; it is decoded through the live
engine with the meeting's vocabulary and the second pass, and its finals become one stream of the
meeting's transcript (a stream session like a speaker's, so the transcript, its exports, corrections and
search treat it alike).

``POST /api/meetings/{id}/recordings`` answers 202 with a job at once; ``GET .../recordings`` and
``GET .../recordings/{job}`` say how far it is. Jobs live on the replica that took the upload (its memory;
a restart loses unfinished ones, whose audio the client still has)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.access import Action, meeting_for
from backend.api.deps import path_int, require_user, services
from backend.compat.files import Segment, transcribe_samples
from backend.compat.media import MediaError, decode_audio
from backend.db.models import Meeting, MeetingStatus, utcnow
from backend.db.queries import meeting_with_terms
from backend.edge.errors import ApiError, not_found
from backend.edge.logs import get_logger
from backend.engine.errors import EngineError
from backend.services import Services
from backend.sessions.caption_store import CaptionStore
from backend.sessions.live import terms_of
from backend.text.vocab import EffectiveVocabulary

log = get_logger(__name__)
MAX_JOBS_KEPT = 200
"""Finished jobs remembered per replica (the oldest are forgotten first)."""


@dataclass
class RecordingJob:
    """One uploaded recording being decoded: ``status`` queued -> decoding -> done | failed."""

    id: str
    meeting_id: int
    user_id: int
    filename: str
    duration_s: float
    decoded_s: float = 0.0
    status: str = "queued"
    error: str | None = None
    finals: int = 0
    session_id: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def advance(self, decoded_s: float, _total_s: float) -> None:
        self.decoded_s = decoded_s

    def as_dict(self) -> dict[str, Any]:
        progress = (
            1.0 if self.status == "done" else self.decoded_s / self.duration_s if self.duration_s else 0.0
        )
        return {
            "id": self.id,
            "meeting_id": self.meeting_id,
            "filename": self.filename,
            "status": self.status,
            "progress": round(min(1.0, progress), 3),
            "decoded_s": round(self.decoded_s, 2),
            "duration_s": round(self.duration_s, 2),
            "finals": self.finals,
            "session_id": self.session_id,
            "error": self.error,
        }


class RecordingJobs:
    """The recording jobs of this replica (event loop only)."""

    def __init__(self) -> None:
        self.jobs: dict[str, RecordingJob] = {}

    def add(self, job: RecordingJob) -> None:
        finished = [j for j in self.jobs.values() if j.status in ("done", "failed")]
        for old in finished[: max(0, len(self.jobs) + 1 - MAX_JOBS_KEPT)]:
            del self.jobs[old.id]
        self.jobs[job.id] = job

    async def close(self) -> None:
        """Shutdown: cancel the jobs still decoding."""
        tasks = [j.task for j in self.jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _jobs(request: Request) -> RecordingJobs:
    return request.app.state.recordings


async def upload_recording(request: Request) -> JSONResponse:
    """Upload a recording of the meeting (multipart field ``file``: wav, flac, mp3, m4a, ogg, webm); it is
    transcribed into the meeting's transcript. The organiser (owner) or an admin only.
    ---
    tags: [meetings]
    responses: {202: {description: "{recording: {id, status, progress, ...}}"},
      413: {description: "over max_recording_bytes or max_recording_s"}, 415: {description: "not audio"}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.MANAGE, record="upload")
    async with request.form(max_files=1, max_fields=8) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(422, "invalid", "file: required", [{"field": "file", "reason": "required"}])
        filename, data = upload.filename or "recording", await upload.read()
    try:
        samples = await asyncio.to_thread(decode_audio, data, svc.settings.max_recording_s)
    except MediaError as exc:
        code = {415: "unsupported_media_type", 413: "too_long"}.get(exc.status, "invalid_audio")
        raise ApiError(exc.status, code, str(exc), [{"field": "file", "reason": code}]) from exc
    del data
    settings = svc.settings
    if not svc.hub.slots.try_take(principal.user_id, settings.max_sessions, settings.max_sessions_per_user):
        raise ApiError(503, "busy", "too many streams and recordings at once; retry shortly")
    job = RecordingJob(uuid.uuid4().hex, meeting_id, principal.user_id, filename[:200], len(samples) / 16000)
    _jobs(request).add(job)
    job.task = asyncio.create_task(_run(svc, job, samples), name=f"recording-{job.id}")
    log.info("recording_queued", meeting_id=meeting_id, job=job.id, duration_s=round(job.duration_s, 1))
    return JSONResponse({"recording": job.as_dict()}, status_code=202)


async def _vocabulary(svc: Services, meeting_id: int) -> tuple[EffectiveVocabulary, str]:
    async with svc.db.session() as db:
        meeting = await meeting_with_terms(db, meeting_id)
        if meeting is None:
            raise LookupError(f"meeting {meeting_id} does not exist")
        terms = [t for v in meeting.vocabularies for t in terms_of(v.terms)]
        return EffectiveVocabulary.from_terms(terms), meeting.decoding


async def _run(svc: Services, job: RecordingJob, samples: Any) -> None:
    """Decode, then store every final as one stream session of the meeting."""
    try:
        job.status = "decoding"
        vocabulary, decoding = await _vocabulary(svc, job.meeting_id)
        segments = await transcribe_samples(svc, samples, vocabulary, decoding, progress=job.advance)
        await _store(svc, job, segments)
        job.status = "done"
        log.info("recording_done", meeting_id=job.meeting_id, job=job.id, finals=job.finals)
    except (EngineError, SQLAlchemyError, LookupError, ValueError) as exc:
        job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"[:300]
        log.error("recording_failed", meeting_id=job.meeting_id, job=job.id, error=job.error)
    finally:
        svc.hub.slots.release(job.user_id)


async def _store(svc: Services, job: RecordingJob, segments: list[Segment]) -> None:
    async with svc.db.session() as db:
        meeting = await db.get(Meeting, job.meeting_id)
        if meeting is not None and meeting.status == MeetingStatus.SCHEDULED:  # the recording is the meeting
            meeting.status, meeting.started_at, meeting.ended_at = MeetingStatus.ENDED, utcnow(), utcnow()
    store = CaptionStore(svc.db, svc.settings.resume_ttl_s)
    opened = await store.create(job.meeting_id, job.user_id)
    job.session_id = opened.session_id
    for segment in segments:
        fields = {
            "meeting_id": job.meeting_id,
            "text": segment.text,
            "start_s": segment.start_s,
            "end_s": segment.end_s,
            "words": [{"text": w.text, "start_s": w.start_s, "end_s": w.end_s} for w in segment.words],
            "matched_terms": list(segment.matched_terms),
        }
        await store.store(opened.session_id, 0, fields, segment.end_s)
        job.finals += 1
    await store.record_end(opened.session_id, 0)
    svc.hub.feed.meeting_changed(job.meeting_id)


async def list_recordings(request: Request) -> JSONResponse:
    """The meeting's recordings being (or lately) transcribed on this replica.
    ---
    tags: [meetings]
    responses: {200: {description: "{recordings: [{id, status, progress, decoded_s, duration_s, ...}]}"}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.SEE)
    jobs = [j.as_dict() for j in _jobs(request).jobs.values() if j.meeting_id == meeting_id]
    return JSONResponse({"recordings": jobs})


async def get_recording(request: Request) -> JSONResponse:
    """One recording job.
    ---
    tags: [meetings]
    responses: {200: {description: "{recording}"}, 404: {description: unknown job}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.SEE)
    job = _jobs(request).jobs.get(request.path_params["job_id"])
    if job is None or job.meeting_id != meeting_id:
        raise not_found("recording")
    return JSONResponse({"recording": job.as_dict()})


routes = [
    Route("/api/meetings/{meeting_id:int}/recordings", upload_recording, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/recordings", list_recordings, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/recordings/{job_id}", get_recording, methods=["GET"]),
]
