"""Dictation notes kept on the server: the dictation page saves its note here as it changes and restores it
on any device. A draft belongs to one dictation and only its owner reads or writes it (an admin neither:
a clinician's note is theirs)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.access import Action, meeting_for
from backend.api.deps import Principal, path_int, require_user, services
from backend.db.models import DictationDraft, Meeting, MeetingKind, utcnow
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.edge.http_limits import MAX_DRAFT_CHARS

LIST_LIMIT = 20
"""Drafts listed by ``GET /api/drafts`` (the latest first)."""


def draft_dict(row: DictationDraft, with_text: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "meeting_id": row.meeting_id,
        "chars": len(row.text),
        "updated_at": as_utc(row.updated_at).isoformat(),
    }
    if with_text:
        data["text"] = row.text
    return data


async def _own_dictation(
    request: Request, db: AsyncSession, meeting_id: int, principal: Principal
) -> Meeting:
    """The caller's own dictation ``meeting_id``; 404 for anything else (no hint that it exists)."""
    meeting = await meeting_for(request, db, principal, meeting_id, Action.NOTE)
    if meeting.kind != MeetingKind.DICTATION:
        raise not_found("dictation")
    return meeting


async def list_drafts(request: Request) -> JSONResponse:
    """The caller's dictation notes, the latest first (without their text).
    ---
    tags: [drafts]
    responses: {200: {description: "{drafts: [{meeting_id, title, chars, updated_at}]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        rows = (
            await db.execute(
                select(DictationDraft, Meeting.title)
                .join(Meeting, Meeting.id == DictationDraft.meeting_id)
                .where(DictationDraft.user_id == principal.user_id)
                .order_by(DictationDraft.updated_at.desc(), DictationDraft.meeting_id.desc())
                .limit(LIST_LIMIT)
            )
        ).all()
        drafts = [draft_dict(row, with_text=False) | {"title": title} for row, title in rows]
    return JSONResponse({"drafts": drafts})


async def get_draft(request: Request) -> JSONResponse:
    """The note of one of the caller's dictations.
    ---
    tags: [drafts]
    responses: {200: {description: "{draft: {meeting_id, text, chars, updated_at}}"}, 404: {description:
      "no such dictation of yours, or no note saved"}}
    """
    principal = await require_user(request)
    meeting_id = path_int(request, "meeting_id")
    async with services(request).db.session() as db:
        await _own_dictation(request, db, meeting_id, principal)
        row = await db.get(DictationDraft, meeting_id)
        if row is None:
            raise not_found("draft")
        return JSONResponse({"draft": draft_dict(row)})


async def put_draft(request: Request) -> JSONResponse:
    """Save the note of one of the caller's dictations (an empty text deletes it).
    ---
    tags: [drafts]
    requestBody: {content: {application/json: {schema: {type: object, required: [text], properties:
      {text: {type: string, maxLength: 100000}}}}}}
    responses:
      200: {description: "{draft} ({draft: null} after an empty text)"}
      404: {description: no such dictation of yours}
      413: {description: "note longer than 100,000 characters (code too_large, errors: [{field: text}]), or
        the user's notes would exceed their quota (code quota_exceeded)"}
    """
    principal = await require_user(request)
    meeting_id = path_int(request, "meeting_id")
    text = field(await json_body(request), "text", str)
    if len(text) > MAX_DRAFT_CHARS:
        raise _too_large()
    quota = services(request).settings.max_draft_chars_per_user
    async with services(request).db.session() as db:
        await _own_dictation(request, db, meeting_id, principal)
        if not text.strip():
            await db.execute(delete(DictationDraft).where(DictationDraft.meeting_id == meeting_id))
            return JSONResponse({"draft": None})
        if await _chars_elsewhere(db, principal.user_id, meeting_id) + len(text) > quota:
            raise ApiError(
                413,
                "quota_exceeded",
                f"your notes may hold {quota:,} characters in all; delete older ones first",
                [{"field": "text", "reason": "quota", "max_chars_total": quota}],
            )
        row = await db.get(DictationDraft, meeting_id)
        if row is None:
            row = DictationDraft(meeting_id=meeting_id, user_id=principal.user_id, text=text)
            db.add(row)
        row.text, row.updated_at = text, utcnow()
        await db.flush()
        return JSONResponse({"draft": draft_dict(row)})


async def _chars_elsewhere(db: AsyncSession, user_id: int, meeting_id: int) -> int:
    """Characters of the user's notes other than the one of ``meeting_id``."""
    total = await db.execute(
        select(func.coalesce(func.sum(func.length(DictationDraft.text)), 0)).where(
            DictationDraft.user_id == user_id, DictationDraft.meeting_id != meeting_id
        )
    )
    return int(total.scalar_one())


def _too_large() -> ApiError:
    return ApiError(
        413,
        "too_large",
        f"text: at most {MAX_DRAFT_CHARS:,} characters",
        [{"field": "text", "reason": "too long", "max_chars": MAX_DRAFT_CHARS}],
    )


routes = [
    Route("/api/drafts", list_drafts, methods=["GET"]),
    Route("/api/drafts/{meeting_id:int}", get_draft, methods=["GET"]),
    Route("/api/drafts/{meeting_id:int}", put_draft, methods=["PUT"]),
]
