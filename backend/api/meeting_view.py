"""The meeting view's REST side: speakers' names per meeting, and read-only viewer links.

A viewer link opens one meeting's live view without an account (``/meeting#link=TOKEN``: the token sits in
the URL's fragment, which browsers never send, so it is in no server or proxy log). Only its SHA-256 is
stored; it always expires; revoking keeps the row (listed as revoked) and closes the viewers using it.
"""

from __future__ import annotations

import unicodedata
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.access import Action, audit, client_address, meeting_for
from backend.api.deps import Principal, path_int, require_user, services
from backend.api.meetings import meeting_dict
from backend.db.models import (
    Meeting,
    MeetingKind,
    MeetingParticipant,
    StreamSession,
    Ticket,
    User,
    ViewerLink,
    utcnow,
)
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.edge.logs import get_logger
from backend.edge.security import new_token, token_hash
from backend.meeting_view.admission import LinkRefused, redeem_viewer_link
from backend.meeting_view.timeline import speaker_names

log = get_logger(__name__)

MAX_NAME_CHARS = 100
DEFAULT_LINK_HOURS = 24
MAX_LINK_HOURS = 24 * 30
LINK_PATH = "/meeting#link="
FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Co", "Cs"}


def clean_display_name(value: str, name_of_field: str = "display_name") -> str:
    """NFC, spaces collapsed, no control/format characters, 1..MAX_NAME_CHARS; 422 naming the field."""
    name = " ".join(unicodedata.normalize("NFC", value).split())
    if any(unicodedata.category(ch) in FORBIDDEN_CATEGORIES for ch in name):
        raise ApiError(422, "invalid", f"{name_of_field}: control characters", [{"field": name_of_field}])
    if not name or len(name) > MAX_NAME_CHARS:
        raise ApiError(
            422,
            "invalid",
            f"{name_of_field}: 1-{MAX_NAME_CHARS} characters",
            [{"field": name_of_field, "reason": "length"}],
        )
    return name


# ----- speakers ---------------------------------------------------------------------------------------
async def _participants(db: AsyncSession, meeting_id: int) -> list[dict[str, Any]]:
    streamed = select(StreamSession.user_id).where(StreamSession.meeting_id == meeting_id)
    named = select(MeetingParticipant.user_id).where(MeetingParticipant.meeting_id == meeting_id)
    ids = {i for i in (await db.execute(streamed.union(named))).scalars() if i is not None}
    users = dict((await db.execute(select(User.id, User.username).where(User.id.in_(ids)))).tuples().all())
    names = await speaker_names(db, meeting_id, ids)
    chosen = set((await db.execute(named.where(MeetingParticipant.display_name != ""))).scalars())
    return [
        {"user_id": i, "username": users[i], "name": names[i], "custom": i in chosen} for i in sorted(users)
    ]


async def list_participants(request: Request) -> JSONResponse:
    """The meeting's speakers (everyone who streamed or was named in it) with their name in the meeting.
    ---
    tags: [meeting view]
    responses: {200: {description: "{participants: [{user_id, username, name, custom}]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), Action.READ, detail="speakers"
        )
        return JSONResponse({"participants": await _participants(db, meeting.id)})


async def set_participant_name(request: Request) -> JSONResponse:
    """Set a speaker's name in this meeting (shown in the meeting view and the exports). A participant (the
    organiser, or someone who spoke in it or opened it to speak or view) sets their own; the organiser (the
    meeting's owner) or an admin may set any participant's. ``display_name`` null or empty goes back to the
    account's name. Names are unique within the meeting.
    ---
    tags: [meeting view]
    requestBody: {content: {application/json: {schema: {type: object, required: [display_name],
      properties: {display_name: {type: string, maxLength: 100, nullable: true}}}}}}
    responses:
      200: {description: "{participant: {user_id, username, name, custom}}"}
      403: {description: "another's name and not the organiser, or not a participant (not_a_participant)"}
      404: {description: "no such participant (an account that never took part is not told apart)"}
      409: {description: "another participant has that name here (code name_taken)"}
      422: {description: "display_name invalid (errors: [{field}])"}
    """
    principal = await require_user(request)
    body = await json_body(request)
    user_id = path_int(request, "user_id")
    raw = field(body, "display_name", str, required=False)
    name = clean_display_name(raw) if raw and raw.strip() else None
    async with services(request).db.session() as db:
        action = Action.SEE if user_id == principal.user_id else Action.EDIT
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), action, detail="rename"
        )
        user = await db.get(User, user_id)
        if user is None or not await _takes_part(db, meeting, user_id):
            if user_id == principal.user_id:
                raise ApiError(403, "not_a_participant", "open the meeting to speak or view it first")
            raise not_found("participant")
        if name is not None:
            await _name_is_free(db, meeting.id, user_id, name)
        await _store_name(db, meeting.id, user_id, name)
        found = [p for p in await _participants(db, meeting.id) if p["user_id"] == user_id]
    plain = {"user_id": user_id, "username": user.username, "name": user.username, "custom": False}
    services(request).hub.feed.meeting_changed(meeting.id)  # relabel in open views, on every replica
    return JSONResponse({"participant": found[0] if found else plain})


async def _takes_part(db: AsyncSession, meeting: Meeting, user_id: int) -> bool:
    """The organiser, a speaker of the meeting, someone named in it, or someone who asked for a ticket to
    speak in it or view it."""
    if meeting.owner_id == user_id:
        return True
    evidence = (
        select(StreamSession.id).where(
            StreamSession.meeting_id == meeting.id, StreamSession.user_id == user_id
        ),
        select(MeetingParticipant.user_id).where(
            MeetingParticipant.meeting_id == meeting.id, MeetingParticipant.user_id == user_id
        ),
        select(Ticket.user_id).where(Ticket.meeting_id == meeting.id, Ticket.user_id == user_id),
    )
    for query in evidence:
        if (await db.execute(query.limit(1))).first() is not None:
            return True
    return False


async def _name_is_free(db: AsyncSession, meeting_id: int, user_id: int, name: str) -> None:
    """409 when another participant is shown as ``name`` (any case) in the meeting."""
    merged = select(MeetingParticipant.user_id).where(
        MeetingParticipant.meeting_id == meeting_id, MeetingParticipant.merged_into.is_not(None)
    )
    shown_as_another = set((await db.execute(merged)).scalars()) | {user_id}
    others = {
        p["user_id"]: p["name"]
        for p in await _participants(db, meeting_id)
        if p["user_id"] not in shown_as_another
    }
    if name.casefold() in {other.casefold() for other in others.values()}:
        raise ApiError(
            409,
            "name_taken",
            "display_name: another participant has this name in the meeting",
            [{"field": "display_name", "reason": "taken"}],
        )


async def _store_name(db: AsyncSession, meeting_id: int, user_id: int, name: str | None) -> None:
    row = await db.get(MeetingParticipant, (meeting_id, user_id))
    if name is None and row is not None and row.merged_into is not None:
        row.display_name = ""  # keeps the merge (transcripts); "" is no name of its own
    elif name is None and row is not None:
        await db.delete(row)
    elif name is not None and row is None:
        db.add(MeetingParticipant(meeting_id=meeting_id, user_id=user_id, display_name=name))
    elif name is not None and row is not None:
        row.display_name = name
    await db.flush()


# ----- viewer links -----------------------------------------------------------------------------------
def link_dict(link: ViewerLink, meeting: Meeting | None = None) -> dict[str, Any]:
    now = utcnow()
    expired = as_utc(link.expires_at) <= now
    status = "revoked" if link.revoked_at else "expired" if expired else "active"
    data: dict[str, Any] = {
        "id": link.id,
        "meeting_id": link.meeting_id,
        "label": link.label,
        "created_by": link.created_by,
        "created_at": as_utc(link.created_at).isoformat(),
        "expires_at": as_utc(link.expires_at).isoformat(),
        "revoked_at": as_utc(link.revoked_at).isoformat() if link.revoked_at else None,
        "last_used_at": as_utc(link.last_used_at).isoformat() if link.last_used_at else None,
        "status": status,
    }
    if meeting is not None:
        data["meeting_title"] = meeting.title
    return data


async def _organised_meeting(
    db: AsyncSession, request: Request, principal: Principal, record: str | None = None
) -> Meeting:
    meeting = await meeting_for(
        request, db, principal, path_int(request, "meeting_id"), Action.MANAGE, record=record
    )
    if meeting.kind == MeetingKind.DICTATION:
        raise ApiError(409, "dictation", "a dictation has no meeting view")
    return meeting


async def create_viewer_link(request: Request) -> JSONResponse:
    """Create a read-only link to the meeting's live view (the organiser: owner or admin). The link (with
    its secret) is returned only here; it expires after ``expires_in_hours``.
    ---
    tags: [meeting view]
    requestBody: {content: {application/json: {schema: {type: object, properties: {label: {type: string,
      maxLength: 100}, expires_in_hours: {type: integer, minimum: 1, maximum: 720, default: 24}}}}}}
    responses:
      201: {description: "{link: {id, label, expires_at, status, ...}, token, url}: url opens the view"}
      403: {description: not the organiser}
      422: {description: "invalid label or expires_in_hours (errors: [{field}])"}
    """
    principal = await require_user(request)
    body = await json_body(request)
    raw_label = field(body, "label", str, required=False) or ""
    label = clean_display_name(raw_label, "label") if raw_label.strip() else ""
    hours = field(body, "expires_in_hours", int, required=False)
    hours = DEFAULT_LINK_HOURS if hours is None else hours
    if not 1 <= hours <= MAX_LINK_HOURS:
        raise ApiError(
            422, "invalid", f"expires_in_hours: 1 to {MAX_LINK_HOURS}", [{"field": "expires_in_hours"}]
        )
    token = new_token()
    async with services(request).db.session() as db:
        meeting = await _organised_meeting(db, request, principal, record="viewer_link")
        link = ViewerLink(
            meeting_id=meeting.id,
            label=label or "Viewer link",
            token_hash=token_hash(token),
            created_by=principal.user_id,
            created_at=utcnow(),
            expires_at=utcnow() + timedelta(hours=hours),
        )
        db.add(link)
        await db.flush()
        data = link_dict(link, meeting)
    log.info("viewer_link_created", link_id=data["id"], meeting_id=data["meeting_id"], hours=hours)
    return JSONResponse({"link": data, "token": token, "url": LINK_PATH + token}, status_code=201)


async def list_meeting_links(request: Request) -> JSONResponse:
    """The meeting's viewer links, revoked and expired ones included (the organiser); never the secrets.
    ---
    tags: [meeting view]
    responses: {200: {description: "{links: [...]}"}, 403: {description: not the organiser}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await _organised_meeting(db, request, principal)
        query = select(ViewerLink).where(ViewerLink.meeting_id == meeting.id).order_by(ViewerLink.id)
        links = (await db.execute(query)).scalars().all()
        return JSONResponse({"links": [link_dict(link, meeting) for link in links]})


async def list_all_links(request: Request) -> JSONResponse:
    """Every viewer link of the meetings the caller organises (an admin: of all meetings).
    ---
    tags: [meeting view]
    responses: {200: {description: "{links: [... with meeting_title]}"}}
    """
    principal = await require_user(request)
    query = select(ViewerLink, Meeting).join(Meeting, ViewerLink.meeting_id == Meeting.id)
    if not principal.is_admin:
        query = query.where(Meeting.owner_id == principal.user_id)
    async with services(request).db.session() as db:
        rows = (await db.execute(query.order_by(ViewerLink.id.desc()))).all()
        return JSONResponse({"links": [link_dict(link, meeting) for link, meeting in rows]})


async def revoke_viewer_link(request: Request) -> JSONResponse:
    """Revoke a viewer link (the organiser): it stops opening the view, and its open views close within
    a few seconds. Revoking twice is harmless.
    ---
    tags: [meeting view]
    responses: {200: {description: "{link}"}, 404: {description: no such link of this meeting}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await _organised_meeting(db, request, principal, record="viewer_link_revoked")
        link = await db.get(ViewerLink, path_int(request, "link_id"))
        if link is None or link.meeting_id != meeting.id:
            raise not_found("viewer link")
        link.revoked_at = link.revoked_at or utcnow()
        data = link_dict(link, meeting)
    services(request).hub.feed.revoke_link(meeting.id, data["id"])
    log.info("viewer_link_revoked", link_id=data["id"], meeting_id=meeting.id)
    return JSONResponse({"link": data})


async def open_viewer_link(request: Request) -> JSONResponse:
    """What a viewer link opens (no login): the meeting, or a typed error the page shows.
    ---
    tags: [meeting view]
    security: []
    requestBody: {content: {application/json: {schema: {type: object, required: [token], properties:
      {token: {type: string}}}}}}
    responses:
      200: {description: "{meeting, expires_at}"}
      403: {description: "code link_revoked or link_expired"}
      404: {description: "code link_unknown"}
    """
    body = await json_body(request)
    token = field(body, "token", str)
    svc = services(request)
    try:
        admission = await redeem_viewer_link(svc, token)
    except LinkRefused as exc:
        raise ApiError(404 if exc.code == "link_unknown" else 403, exc.code, str(exc)) from exc
    async with svc.db.session() as db:
        meeting = await db.get(Meeting, admission.meeting_id)
        link = await db.get(ViewerLink, admission.link_id)
        if meeting is None or link is None:
            raise ApiError(404, "link_unknown", "this viewer link is not valid")
        audit(db, meeting, "read", None, client_address(request), detail="viewer link", actor_name=link.label)
        data = {k: v for k, v in meeting_dict(meeting, with_vocabularies=False).items() if k != "owner_id"}
        return JSONResponse({"meeting": data, "expires_at": as_utc(link.expires_at).isoformat()})


routes = [
    Route("/api/meetings/{meeting_id:int}/participants", list_participants, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/participants/{user_id:int}", set_participant_name, methods=["PUT"]),
    Route("/api/meetings/{meeting_id:int}/viewer-links", list_meeting_links, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/viewer-links", create_viewer_link, methods=["POST"]),
    Route(
        "/api/meetings/{meeting_id:int}/viewer-links/{link_id:int}", revoke_viewer_link, methods=["DELETE"]
    ),
    Route("/api/viewer-links", list_all_links, methods=["GET"]),
    Route("/api/viewer-links/open", open_viewer_link, methods=["POST"]),
]
