"""A past meeting's (or dictation's) transcript, and the corrections people make to it afterwards.

A correction is stored beside the final it corrects (``caption_edits``): the final's own text stays as the
recognizer wrote it (evaluation reads it, the history shows it); the latest correction is what the
transcript, the meeting view and the exports show. The organiser (the meeting's owner) and admins edit,
rename and merge speakers; everyone who may read the meeting reads its transcript and its history. Search
finds lines across the meetings the caller may read: PostgreSQL's full-text search, a word match on SQLite.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.access import Action, meeting_for, readable
from backend.api.deps import Principal, path_int, require_user, services
from backend.api.meetings import meeting_dict
from backend.db.models import (
    CaptionEdit,
    CaptionSegment,
    Meeting,
    MeetingKind,
    MeetingParticipant,
    StreamSession,
    Term,
    User,
    Vocabulary,
    utcnow,
)
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.meeting_view.timeline import TimelineFinal, meeting_timeline, speaker_names
from backend.sessions.dictations import connected_meetings, end_idle_dictations
from backend.text.dictation_commands import cue_texts, dictate
from backend.text.written_form import to_written

MAX_LINE_CHARS = 2000
"""Longest corrected line (characters)."""
MAX_SUGGESTED_WORDS = 6
"""A corrected span longer than this is a rewrite, not a term: no vocabulary suggestion."""
SEARCH_LIMIT = 50
LIST_LIMIT = 50
PREVIEW_CHARS = 160
TITLE_WORDS = 8
AUTOMATIC_TITLE = re.compile(r"^Dictation( by |\s+\d|$)")
"""The titles a dictation gets when no one names it (the API's and the dictation page's)."""
MAX_QUERY_CHARS = 200
WORD = re.compile(r"\w[\w'’-]*", re.UNICODE)


def _organises(meeting: Meeting, principal: Principal) -> bool:
    return principal.is_admin or meeting.owner_id == principal.user_id


def line_dict(final: TimelineFinal) -> dict[str, Any]:
    return {
        "id": final.id,
        "seq": final.seq,
        "speaker": {"user_id": final.user_id, "name": final.speaker},
        "text": final.text,
        "written": to_written(final.text, final.matched_terms),
        "original": final.original,
        "edited": final.original is not None,
        "start_s": final.meeting_start_s,
        "end_s": final.meeting_end_s,
        "matched_terms": final.matched_terms,
    }


async def _meeting_terms(db: AsyncSession, meeting: Meeting) -> list[str]:
    """The meeting's vocabulary terms as written (display form, else the text), to highlight."""
    ids = [v.id for v in meeting.vocabularies]
    if not ids:
        return []
    rows = await db.execute(select(Term.text, Term.display).where(Term.vocabulary_id.in_(ids)))
    return sorted({display or text for text, display in rows.tuples().all()}, key=str.casefold)


async def _targets(db: AsyncSession, meeting: Meeting, principal: Principal) -> list[dict[str, Any]]:
    """Where a correction's term may go: the meeting's vocabularies the caller may change, then their own
    personal lists (the page creates "My terms" when they have none)."""
    out = [
        {"id": v.id, "name": v.name, "scope": "meeting"}
        for v in meeting.vocabularies
        if principal.is_admin or v.owner_id == principal.user_id
    ]
    seen = {t["id"] for t in out}
    mine = await db.execute(
        select(Vocabulary.id, Vocabulary.name)
        .where(Vocabulary.owner_id == principal.user_id)
        .order_by(Vocabulary.id)
    )
    out += [{"id": i, "name": n, "scope": "personal"} for i, n in mine.tuples().all() if i not in seen]
    return out


async def _speakers(db: AsyncSession, meeting_id: int) -> list[dict[str, Any]]:
    streamed = select(StreamSession.user_id).where(StreamSession.meeting_id == meeting_id)
    ids = {i for i in (await db.execute(streamed)).scalars() if i is not None}
    if not ids:
        return []
    names = await speaker_names(db, meeting_id, ids)
    users = dict((await db.execute(select(User.id, User.username).where(User.id.in_(ids)))).tuples().all())
    merged = dict(
        (
            await db.execute(
                select(MeetingParticipant.user_id, MeetingParticipant.merged_into).where(
                    MeetingParticipant.meeting_id == meeting_id, MeetingParticipant.user_id.in_(ids)
                )
            )
        )
        .tuples()
        .all()
    )
    return [
        {"user_id": i, "username": users[i], "name": names[i], "merged_into": merged.get(i)}
        for i in sorted(users)
    ]


async def get_transcript(request: Request) -> JSONResponse:
    """A meeting's (or dictation's) transcript: every line on the meeting's clock with its speaker, its text
    (the latest correction where there is one; ``original`` is what was recognized), the vocabulary terms
    to highlight, the speakers, and whether the caller may edit. A dictation's lines also carry
    ``dictated``: the text with its spoken commands carried out (null: scratched).
    ---
    tags: [transcripts]
    responses: {200: {description: "{meeting, can_edit, lines, speakers, terms, targets}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(request, db, principal, path_int(request, "meeting_id"), Action.READ)
        _clock, finals = await meeting_timeline(db, meeting.id)
        can_edit = _organises(meeting, principal)
        lines = [line_dict(f) for f in finals]
        if (
            meeting.kind == MeetingKind.DICTATION
        ):  # what the note says: commands carried out (None: scratched)
            for line, shown in zip(lines, cue_texts([f.text for f in finals]), strict=True):
                line["dictated"] = shown
        return JSONResponse(
            {
                "meeting": meeting_dict(meeting),
                "can_edit": can_edit,
                "lines": lines,
                "speakers": await _speakers(db, meeting.id),
                "terms": await _meeting_terms(db, meeting),
                "targets": await _targets(db, meeting, principal),
            }
        )


async def _segment(db: AsyncSession, meeting: Meeting, request: Request) -> CaptionSegment:
    segment = await db.get(CaptionSegment, path_int(request, "caption_id"))
    if segment is None or segment.meeting_id != meeting.id:
        raise not_found("caption")
    return segment


def suggest_terms(original: str, corrected: str, known: set[str] | None = None) -> list[str]:
    """The spans a correction wrote in place of recognized words, as vocabulary candidates: "halverson
    logistics" -> "Halvorsen Logistics" suggests "Halvorsen Logistics". Spans of more than
    ``MAX_SUGGESTED_WORDS`` words, without a letter, or already ``known`` (casefolded) are left out."""
    before = WORD.findall(original)
    after = WORD.findall(corrected)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for op, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if op not in ("replace", "insert"):
            continue
        span = " ".join(after[j1:j2])
        if not 0 < j2 - j1 <= MAX_SUGGESTED_WORDS or not any(ch.isalpha() for ch in span):
            continue
        if span.casefold() in (known or set()) or span in out:
            continue
        out.append(span)
    return out


async def edit_line(request: Request) -> JSONResponse:
    """Correct one line (the organiser or an admin). The correction is stored beside the original, which is
    kept; sending the original text again undoes the correction (the history keeps both). The answer
    suggests the corrected words as vocabulary terms.
    ---
    tags: [transcripts]
    requestBody: {content: {application/json: {schema: {type: object, required: [text], properties:
      {text: {type: string, maxLength: 2000}}}}}}
    responses:
      200: {description: "{line, suggestions: [term], targets: [{id, name, scope}]}"}
      403: {description: not the organiser}
      404: {description: no such line in this meeting}
      422: {description: "text empty or too long (errors: [{field: text}])"}
    """
    principal = await require_user(request)
    body = await json_body(request)
    text = " ".join(field(body, "text", str).split())
    if not text or len(text) > MAX_LINE_CHARS:
        raise ApiError(
            422, "invalid", f"text: 1-{MAX_LINE_CHARS} characters", [{"field": "text", "reason": "length"}]
        )
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), Action.EDIT, detail="line"
        )
        segment = await _segment(db, meeting, request)
        previous = (
            await db.execute(
                select(CaptionEdit.text)
                .where(CaptionEdit.segment_id == segment.id)
                .order_by(CaptionEdit.id.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
        if text != (previous if previous is not None else segment.text):
            db.add(
                CaptionEdit(
                    segment_id=segment.id,
                    meeting_id=meeting.id,
                    text=text,
                    edited_by=principal.user_id,
                    created_at=utcnow(),
                )
            )
            await db.flush()
        _clock, finals = await meeting_timeline(db, meeting.id)
        line = next(f for f in finals if f.id == segment.id)
        known = {t.casefold() for t in await _meeting_terms(db, meeting)}
        suggestions = suggest_terms(previous or segment.text, text, known) if text != segment.text else []
        return JSONResponse(
            {
                "line": line_dict(line),
                "suggestions": suggestions,
                "targets": await _targets(db, meeting, principal),
            }
        )


async def line_history(request: Request) -> JSONResponse:
    """One line's history: the recognized text and every correction (who, when), the oldest first.
    ---
    tags: [transcripts]
    responses: {200: {description: "{original, edits: [{text, edited_by: {user_id, name}, created_at}]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), Action.READ, detail="history"
        )
        segment = await _segment(db, meeting, request)
        rows = (
            await db.execute(
                select(CaptionEdit, User.username, User.display_name)
                .outerjoin(User, User.id == CaptionEdit.edited_by)
                .where(CaptionEdit.segment_id == segment.id)
                .order_by(CaptionEdit.id)
            )
        ).all()
        edits = [
            {
                "text": edit.text,
                "edited_by": {"user_id": edit.edited_by, "name": display or username or "Deleted user"},
                "created_at": as_utc(edit.created_at).isoformat(),
            }
            for edit, username, display in rows
        ]
        return JSONResponse({"original": segment.text, "edits": edits})


async def merge_speaker(request: Request) -> JSONResponse:
    """Show one speaker's lines under another speaker's label in this meeting (the organiser or an admin);
    ``into_user_id`` null undoes it. Renaming a speaker for the whole meeting is
    ``PUT /api/meetings/{id}/participants/{user_id}``.
    ---
    tags: [transcripts]
    requestBody: {content: {application/json: {schema: {type: object, required: [into_user_id],
      properties: {into_user_id: {type: integer, nullable: true}}}}}}
    responses:
      200: {description: "{speakers}"}
      403: {description: not the organiser}
      404: {description: no such speaker in this meeting}
      422: {description: "into_user_id is the speaker itself, not a speaker here, or itself merged"}
    """
    principal = await require_user(request)
    body = await json_body(request)
    user_id = path_int(request, "user_id")
    if "into_user_id" not in body:
        raise ApiError(422, "invalid", "into_user_id: required", [{"field": "into_user_id"}])
    into = body["into_user_id"]
    if into is not None and (not isinstance(into, int) or isinstance(into, bool)):
        raise ApiError(422, "invalid", "into_user_id: a speaker's id or null", [{"field": "into_user_id"}])
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), Action.EDIT, detail="merge"
        )
        speakers = {s["user_id"]: s for s in await _speakers(db, meeting.id)}
        if user_id not in speakers:
            raise not_found("speaker")
        if into is not None and (
            into == user_id or into not in speakers or speakers[into]["merged_into"] is not None
        ):
            raise ApiError(
                422, "invalid", "into_user_id: another speaker of this meeting", [{"field": "into_user_id"}]
            )
        if into is not None and any(s["merged_into"] == user_id for s in speakers.values()):
            raise ApiError(
                422, "invalid", "another speaker is merged into this one", [{"field": "into_user_id"}]
            )
        row = await db.get(MeetingParticipant, (meeting.id, user_id))
        if row is None and into is not None:
            db.add(
                MeetingParticipant(meeting_id=meeting.id, user_id=user_id, display_name="", merged_into=into)
            )
        elif row is not None:
            row.merged_into = into
            if into is None and not row.display_name:
                await db.delete(row)
        await db.flush()
        return JSONResponse({"speakers": await _speakers(db, meeting.id)})


async def search(request: Request) -> JSONResponse:
    """Lines that contain the query's words, across the meetings the caller may read, the newest meeting
    first (corrections are searched, not the recognized text they replace). PostgreSQL ranks with its
    full-text search (``simple`` configuration: no stemming, so names match as written); SQLite matches
    every word as a substring, case-insensitively.
    ---
    tags: [transcripts]
    parameters: [{name: q, in: query, required: true, schema: {type: string, maxLength: 200}}]
    responses:
      200: {description: "{hits: [{meeting_id, meeting_title, kind, line_id, speaker, text, start_s}]}"}
      422: {description: "q empty or too long"}
    """
    principal = await require_user(request)
    q = " ".join(request.query_params.get("q", "").split())
    words = WORD.findall(q)
    if not words or len(q) > MAX_QUERY_CHARS:
        raise ApiError(422, "invalid", f"q: 1-{MAX_QUERY_CHARS} characters with a word", [{"field": "q"}])
    svc = services(request)
    latest = (
        select(CaptionEdit.segment_id, func.max(CaptionEdit.id).label("edit_id"))
        .group_by(CaptionEdit.segment_id)
        .subquery()
    )
    edit = CaptionEdit.__table__.alias("edit")
    shown = func.coalesce(edit.c.text, CaptionSegment.text)
    query = (
        select(CaptionSegment.id, Meeting.id, Meeting.title, Meeting.kind, shown)
        .join(Meeting, Meeting.id == CaptionSegment.meeting_id)
        .outerjoin(latest, latest.c.segment_id == CaptionSegment.id)
        .outerjoin(edit, edit.c.id == latest.c.edit_id)
        .where(readable(principal))
    )
    async with svc.db.session() as db:
        if svc.db.engine.dialect.name == "postgresql":
            document = func.to_tsvector("simple", shown)
            wanted = func.plainto_tsquery("simple", " ".join(words))
            query = query.where(document.op("@@")(wanted)).order_by(
                Meeting.id.desc(), func.ts_rank(document, wanted).desc(), CaptionSegment.id
            )
        else:
            query = query.where(
                and_(*(func.lower(shown).contains(w.casefold(), autoescape=True) for w in words))
            ).order_by(Meeting.id.desc(), CaptionSegment.id)
        rows = (await db.execute(query.limit(SEARCH_LIMIT))).all()
        hits = []
        placed: dict[int, dict[int, TimelineFinal]] = {}
        for line_id, meeting_id, title, kind, text in rows:
            if meeting_id not in placed:
                _clock, finals = await meeting_timeline(db, meeting_id)
                placed[meeting_id] = {f.id: f for f in finals}
            final = placed[meeting_id].get(line_id)
            hits.append(
                {
                    "meeting_id": meeting_id,
                    "meeting_title": title,
                    "kind": kind.value,
                    "line_id": line_id,
                    "speaker": final.speaker if final else None,
                    "text": text,
                    "start_s": final.meeting_start_s if final else None,
                }
            )
    return JSONResponse({"hits": hits})


def dictated_note(texts: list[str]) -> str:
    """A dictation's text as its page wrote the note: spoken commands carried out, on one line."""
    note: str = ""
    history: list[str] = []
    for text in texts:
        note, history = dictate(note, text, history=history)
    return " ".join(note.split())


def display_title(meeting: Meeting, text: str) -> str:
    """A dictation nobody named is titled by its first words; anything else by its title."""
    if meeting.kind == MeetingKind.DICTATION and AUTOMATIC_TITLE.match(meeting.title) and text.strip():
        words = text.split()
        return " ".join(words[:TITLE_WORDS]) + ("…" if len(words) > TITLE_WORDS else "")
    return meeting.title


async def list_transcripts(request: Request) -> JSONResponse:
    """The latest meetings the caller organises, belongs to or may read as one of the organisation
    (``kind=meeting``; an admin too: previews are content) or the caller's own dictations
    (``kind=dictation``: "My dictations", an admin's too), each with a title (a dictation nobody named: its
    first words) and a preview of its text. Dictations left live (their page closed without Stop) are
    ended first (``backend.sessions.dictations``).
    ---
    tags: [transcripts]
    parameters: [{name: kind, in: query, schema: {type: string, enum: [meeting, dictation]}}]
    responses: {200: {description: "{transcripts: [{id, kind, title, display_title, status, preview, ...}]}"}}
    """
    principal = await require_user(request)
    kind = request.query_params.get("kind", "meeting")
    if kind not in ("meeting", "dictation"):
        raise ApiError(422, "invalid", "kind: meeting or dictation", [{"field": "kind"}])
    svc = services(request)
    query = select(Meeting).order_by(Meeting.id.desc()).limit(LIST_LIMIT)
    if kind == "dictation":
        await end_idle_dictations(svc.db, lambda: connected_meetings(svc.hub))
        query = query.where(Meeting.kind == MeetingKind.DICTATION, Meeting.owner_id == principal.user_id)
    else:
        query = query.where(Meeting.kind == MeetingKind.MEETING, readable(principal))
    out = []
    async with svc.db.session() as db:
        for meeting in (await db.execute(query.options(selectinload(Meeting.vocabularies)))).scalars():
            _clock, finals = await meeting_timeline(db, meeting.id)
            text = " ".join(f.text for f in finals)
            if meeting.kind == MeetingKind.DICTATION:
                text = dictated_note([f.text for f in finals])
            preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1].rstrip() + "…"
            out.append(
                meeting_dict(meeting)
                | {"display_title": display_title(meeting, text), "preview": preview, "lines": len(finals)}
            )
    return JSONResponse({"transcripts": out})


routes = [
    Route("/api/transcripts", list_transcripts, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/transcript", get_transcript, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/captions/{caption_id:int}", edit_line, methods=["PUT"]),
    Route("/api/meetings/{meeting_id:int}/captions/{caption_id:int}/history", line_history, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/speakers/{user_id:int}/merge", merge_speaker, methods=["PUT"]),
    Route("/api/search", search, methods=["GET"]),
]
