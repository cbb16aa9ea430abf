"""Meetings and dictation sessions: CRUD, start/end, tickets, captions export."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.access import PRIVATE, VISIBILITIES, Action, listable, meeting_for
from backend.api.deps import Principal, is_id, path_int, require_user, services
from backend.db.models import (
    Meeting,
    MeetingKind,
    MeetingStatus,
    Ticket,
    Vocabulary,
    utcnow,
)
from backend.edge.errors import ApiError, field, json_body
from backend.edge.security import new_ticket, token_hash
from backend.meeting_view.timeline import TimelineFinal, meeting_timeline
from backend.text.captions_export import Cue, content_disposition, export_filename, render_captions
from backend.text.dictation_commands import cue_texts
from backend.text.written_form import to_written

DECODINGS = ("greedy", "beam")


def meeting_dict(meeting: Meeting, with_vocabularies: bool = True) -> dict[str, Any]:
    """A meeting as the API shows it (``with_vocabularies``: its vocabularies must be loaded)."""
    return {
        "id": meeting.id,
        "kind": meeting.kind.value,
        "title": meeting.title,
        "owner_id": meeting.owner_id,
        "status": meeting.status.value,
        "chunk_s": meeting.chunk_ms / 1000,
        "decoding": meeting.decoding,
        "vocabulary_ids": [v.id for v in meeting.vocabularies] if with_vocabularies else [],
        "created_at": meeting.created_at.isoformat(),
        "started_at": meeting.started_at.isoformat() if meeting.started_at else None,
        "ended_at": meeting.ended_at.isoformat() if meeting.ended_at else None,
        "visibility": meeting.visibility,
    }


async def _vocabularies(db: AsyncSession, ids: Any, principal: Principal) -> list[Vocabulary]:
    if not isinstance(ids, list) or not all(is_id(i) for i in ids):
        raise ApiError(422, "invalid", "vocabulary_ids: a list of ids", [{"field": "vocabulary_ids"}])
    rows = list((await db.execute(select(Vocabulary).where(Vocabulary.id.in_(ids)))).scalars())
    visible = {v.id: v for v in rows if principal.is_admin or v.owner_id in (None, principal.user_id)}
    missing = [i for i in ids if i not in visible]
    if missing:
        raise ApiError(422, "invalid", f"unknown vocabularies: {missing}", [{"field": "vocabulary_ids"}])
    return [visible[i] for i in dict.fromkeys(ids)]


def _apply_fields(meeting: Meeting, body: dict[str, Any], allowed_chunks: list[float]) -> None:
    title = field(body, "title", str, required=False)
    if title is not None:
        title = " ".join(title.split())
        if not title or len(title) > 200:
            raise ApiError(
                422, "invalid", "title: 1-200 characters", [{"field": "title", "reason": "length"}]
            )
        meeting.title = title
    chunk_s = field(body, "chunk_s", (int, float), required=False)
    if chunk_s is not None:
        if chunk_s not in allowed_chunks:
            raise ApiError(422, "invalid", f"chunk_s: one of {allowed_chunks}", [{"field": "chunk_s"}])
        meeting.chunk_ms = round(chunk_s * 1000)
    decoding = field(body, "decoding", str, required=False)
    if decoding is not None:
        if decoding not in DECODINGS:
            raise ApiError(422, "invalid", "decoding: greedy or beam", [{"field": "decoding"}])
        meeting.decoding = decoding
    visibility = field(body, "visibility", str, required=False)
    if visibility is not None:
        if visibility not in VISIBILITIES:
            raise ApiError(422, "invalid", "visibility: private or organisation", [{"field": "visibility"}])
        if visibility != PRIVATE and meeting.kind == MeetingKind.DICTATION:
            raise ApiError(422, "invalid", "a dictation is always private", [{"field": "visibility"}])
        meeting.visibility = visibility


async def list_meetings(request: Request) -> JSONResponse:
    """The meetings the caller organises or belongs to, those visible to the organisation, and their own
    dictations (an admin: every meeting, to administer it; its content stays audited).
    ---
    tags: [meetings]
    responses: {200: {description: "{meetings: [...]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        query = select(Meeting).options(selectinload(Meeting.vocabularies)).order_by(Meeting.id.desc())
        query = query.where(listable(principal))
        meetings = (await db.execute(query)).scalars().all()
        return JSONResponse({"meetings": [meeting_dict(m) for m in meetings]})


async def create_meeting(request: Request) -> JSONResponse:
    """Create a meeting; its creator owns it (starts, ends and edits it, creates its viewer links).
    ---
    tags: [meetings]
    requestBody: {content: {application/json: {schema: {type: object, required: [title], properties:
      {title: {type: string}, chunk_s: {type: number, enum: [0.56, 1.12]}, decoding: {type: string,
      enum: [greedy, beam]}, vocabulary_ids: {type: array, items: {type: integer}}}}}}}
    responses: {201: {description: "{meeting}"}, 422: {description: invalid field}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    field(body, "title", str)
    svc = services(request)
    async with svc.db.session() as db:
        meeting = Meeting(
            title="",
            owner_id=principal.user_id,
            chunk_ms=1120,
            decoding=svc.settings.default_decoding,
            vocabularies=[],
        )
        _apply_fields(meeting, body, svc.settings.allowed_chunk_s)
        meeting.vocabularies = await _vocabularies(db, body.get("vocabulary_ids", []), principal)
        db.add(meeting)
        await db.flush()
        return JSONResponse({"meeting": meeting_dict(meeting)}, status_code=201)


async def create_dictation(request: Request) -> JSONResponse:
    """Start a dictation: a one-speaker meeting that uses the caller's personal vocabularies.
    ---
    tags: [meetings]
    requestBody: {content: {application/json: {schema: {type: object, properties: {title: {type: string},
      chunk_s: {type: number}, decoding: {type: string}}}}}}
    responses: {201: {description: "{meeting}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    svc = services(request)
    async with svc.db.session() as db:
        personal = list(
            (await db.execute(select(Vocabulary).where(Vocabulary.owner_id == principal.user_id))).scalars()
        )
        meeting = Meeting(
            kind=MeetingKind.DICTATION,
            title=f"Dictation by {principal.username}",
            owner_id=principal.user_id,
            chunk_ms=1120,
            decoding=svc.settings.default_decoding,
            vocabularies=personal,
        )
        _apply_fields(meeting, body, svc.settings.allowed_chunk_s)
        db.add(meeting)
        await db.flush()
        return JSONResponse({"meeting": meeting_dict(meeting)}, status_code=201)


async def get_meeting(request: Request) -> JSONResponse:
    """One meeting.
    ---
    tags: [meetings]
    responses: {200: {description: "{meeting}"}, 404: {description: not found}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(request, db, principal, path_int(request, "meeting_id"), Action.SEE)
        return JSONResponse({"meeting": meeting_dict(meeting)})


async def update_meeting(request: Request) -> JSONResponse:
    """Change a meeting's title, chunk size, decoding, vocabularies (applies at its next start) or
    ``visibility`` (``private``: the organiser and members; ``organisation``: every account).
    ---
    tags: [meetings]
    responses: {200: {description: "{meeting}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    svc = services(request)
    async with svc.db.session() as db:
        changes_visibility = isinstance(body.get("visibility"), str)
        meeting = await meeting_for(
            request,
            db,
            principal,
            path_int(request, "meeting_id"),
            Action.MANAGE,
            record="visibility" if changes_visibility else None,
            detail=str(body.get("visibility")) if changes_visibility else "",
        )
        _apply_fields(meeting, body, svc.settings.allowed_chunk_s)
        if "vocabulary_ids" in body:
            meeting.vocabularies = await _vocabularies(db, body["vocabulary_ids"], principal)
        await db.flush()
        return JSONResponse({"meeting": meeting_dict(meeting)})


async def start_meeting(request: Request) -> JSONResponse:
    """Start a meeting: its vocabulary is compiled and registered before any audio arrives.
    ---
    tags: [meetings]
    responses: {200: {description: "{meeting, vocabulary_version}"}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        meeting = await meeting_for(request, db, principal, meeting_id, Action.MANAGE)
        if meeting.status == MeetingStatus.ENDED:
            raise ApiError(409, "ended", "this meeting has ended; create a new one")
        meeting.status = MeetingStatus.LIVE
        meeting.started_at = meeting.started_at or utcnow()
    live = await svc.hub.open_meeting(meeting_id)
    async with svc.db.session() as db:
        meeting = await meeting_for(request, db, principal, meeting_id, Action.SEE)
        return JSONResponse({"meeting": meeting_dict(meeting), "vocabulary_version": live.version})


async def end_meeting(request: Request) -> JSONResponse:
    """End a meeting: its live streams are flushed (finals persisted) and closed.
    ---
    tags: [meetings]
    responses: {200: {description: "{meeting}"}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        meeting = await meeting_for(request, db, principal, meeting_id, Action.MANAGE)
        meeting.status = MeetingStatus.ENDED
        meeting.ended_at = utcnow()
    await svc.hub.close_meeting(meeting_id, "meeting ended")
    async with svc.db.session() as db:
        meeting = await meeting_for(request, db, principal, meeting_id, Action.SEE)
        return JSONResponse({"meeting": meeting_dict(meeting)})


async def apply_vocabulary(request: Request) -> JSONResponse:
    """Apply the meeting's (edited) vocabularies to its live streams now.
    ---
    tags: [meetings]
    responses: {200: {description: "{applied, vocabulary_version}"}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.MANAGE)
    live = await svc.hub.apply_vocabulary(meeting_id)
    return JSONResponse({"applied": live is not None, "vocabulary_version": live.version if live else None})


async def create_ticket(request: Request) -> JSONResponse:
    """A single-use WebSocket ticket for this meeting, valid ``ticket_ttl_s`` seconds.
    ---
    tags: [meetings]
    responses: {200: {description: "{ticket, expires_in_s, meeting}"}, 409: {description: meeting ended}}
    """
    principal = await require_user(request)
    svc = services(request)
    ticket = new_ticket(principal.token_id)  # its sockets end when that API token is revoked
    ttl = svc.settings.ticket_ttl_s
    async with svc.db.session() as db:
        meeting = await meeting_for(request, db, principal, path_int(request, "meeting_id"), Action.OPEN)
        if meeting.status == MeetingStatus.ENDED:
            raise ApiError(409, "ended", "this meeting has ended")
        db.add(
            Ticket(
                token_hash=token_hash(ticket),
                user_id=principal.user_id,
                meeting_id=meeting.id,
                expires_at=utcnow() + timedelta(seconds=ttl),
            )
        )
        data = meeting_dict(meeting)
    return JSONResponse({"ticket": ticket, "expires_in_s": ttl, "meeting": data})


async def meeting_captions(request: Request) -> Response:
    """The meeting's persisted captions of every speaker on the meeting's clock (a final's time = its stream's
    start - the meeting's start + its time in the stream), in that order, labelled with the speaker's name
    in the meeting: JSON, WebVTT (``<v Name>`` voice tags), SRT or text (``Name: `` prefix).
    ---
    tags: [meetings]
    ``form``: ``written`` (numbers, doses, dates and times in written form: "600 mg",
    ``backend.text.written_form``; vocabulary terms untouched) or ``spoken`` (the text as stored); the
    default is
    written for a dictation, spoken for a meeting. JSON gives both (``text`` as stored, ``written``).
    ---
    tags: [meetings]
    parameters:
      - {name: format, in: query, schema: {type: string, enum: [json, vtt, srt, text]}}
      - {name: form, in: query, schema: {type: string, enum: [spoken, written]}}
    responses: {200: {description: captions}, 422: {description: unknown format or form}}
    """
    principal = await require_user(request)
    fmt = request.query_params.get("format", "json")
    action = Action.READ if fmt == "json" else Action.EXPORT
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), action, detail=fmt
        )
        _clock, finals = await meeting_timeline(db, meeting.id)
    form = request.query_params.get("form", "written" if meeting.kind == MeetingKind.DICTATION else "spoken")
    if form not in ("spoken", "written"):
        raise ApiError(422, "invalid", "form must be spoken or written", [{"field": "form"}])
    if fmt == "json":
        return JSONResponse({"captions": [_caption_dict(f) for f in finals]})
    try:
        said: list[str | None] = [f.text for f in finals]
        if meeting.kind == MeetingKind.DICTATION:  # spoken commands are carried out, never written
            said = cue_texts([f.text for f in finals])
        shown = [
            (to_written(t, f.matched_terms) if form == "written" else t) if t else None
            for f, t in zip(finals, said, strict=True)
        ]
        cues = [
            Cue(f.meeting_start_s, f.meeting_end_s, t, f.speaker)
            for f, t in zip(finals, shown, strict=True)
            if t
        ]
        body, media = render_captions(fmt, cues)
    except ValueError as exc:
        raise ApiError(422, "invalid", str(exc), [{"field": "format"}]) from exc
    day = meeting.started_at or meeting.created_at
    return Response(
        body,
        media_type=media,
        headers={"content-disposition": content_disposition(export_filename(meeting.title, fmt, day))},
    )


def _caption_dict(final: TimelineFinal) -> dict[str, Any]:
    return {
        "id": final.id,
        "seq": final.seq,
        "session_id": final.session_id,
        "user_id": final.user_id,
        "speaker": final.speaker,
        "text": final.text,
        "written": to_written(final.text, final.matched_terms),
        "start_s": final.start_s,
        "end_s": final.end_s,
        "meeting_start_s": final.meeting_start_s,
        "meeting_end_s": final.meeting_end_s,
        "matched_terms": final.matched_terms,
    }


routes = [
    Route("/api/meetings", list_meetings, methods=["GET"]),
    Route("/api/meetings", create_meeting, methods=["POST"]),
    Route("/api/dictations", create_dictation, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}", get_meeting, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}", update_meeting, methods=["PATCH"]),
    Route("/api/meetings/{meeting_id:int}/start", start_meeting, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/end", end_meeting, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/apply-vocabulary", apply_vocabulary, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/ticket", create_ticket, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/captions", meeting_captions, methods=["GET"]),
]
