"""Who belongs to a meeting, deleting meetings and dictations, retention, and the access audit (issue 46).

Deleting ends the meeting's live sessions first (their last finals flushed, then ``error``
``meeting_deleted`` and close 1000; viewers get ``ended``), then erases every row of it in one transaction
(``backend.db.erase``) and records the deletion in the audit, whose rows about the meeting stay.
"""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.access import Action, audit, client_address, meeting_for
from backend.api.deps import path_int, require_admin, require_user, services
from backend.db.erase import erase_meeting
from backend.db.models import (
    AccessAudit,
    Meeting,
    MeetingKind,
    MeetingMember,
    MeetingStatus,
    StreamSession,
    User,
    utcnow,
)
from backend.db.queries import add_member
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.edge.logs import get_logger

if TYPE_CHECKING:
    from backend.services import Services

log = get_logger(__name__)

AUDIT_PAGE = 200
AUDIT_MAX = 1000
CSV_COLUMNS = (
    "id", "at", "actor_id", "actor", "role", "via", "action", "meeting_id", "kind", "owner_id",
    "admin_access", "address", "detail",
)  # fmt: skip


# ----- members ----------------------------------------------------------------------------------------
async def _members(db: AsyncSession, meeting: Meeting) -> dict[str, Any]:
    rows = (
        await db.execute(
            select(MeetingMember, User)
            .join(User, User.id == MeetingMember.user_id)
            .where(MeetingMember.meeting_id == meeting.id)
            .order_by(User.username)
        )
    ).all()
    spoke = set(await _speakers(db, meeting.id))
    organiser = await db.get(User, meeting.owner_id) if meeting.owner_id is not None else None
    members = {
        user.id: _person(user)
        | {"added_at": as_utc(row.added_at).isoformat(), "added_by": row.added_by, "spoke": user.id in spoke}
        for row, user in rows
    }
    for user in (await db.execute(select(User).where(User.id.in_(spoke - set(members))))).scalars():
        members[user.id] = _person(user) | {"added_at": None, "added_by": None, "spoke": True}
    members.pop(meeting.owner_id or 0, None)
    return {
        "organiser": _person(organiser) if organiser else None,
        "visibility": meeting.visibility,
        "members": sorted(members.values(), key=lambda m: m["username"]),
    }


async def _speakers(db: AsyncSession, meeting_id: int) -> list[int]:
    query = select(StreamSession.user_id).where(
        StreamSession.meeting_id == meeting_id, StreamSession.user_id.is_not(None)
    )
    return [i for i in (await db.execute(query.distinct())).scalars() if i is not None]


def _person(user: User) -> dict[str, Any]:
    return {"user_id": user.id, "username": user.username, "name": user.display_name or user.username}


async def list_members(request: Request) -> JSONResponse:
    """The meeting's organiser, members and visibility (anyone who may read the meeting).
    ---
    tags: [privacy]
    responses: {200: {description: "{organiser, visibility, members: [{user_id, username, name, added_at}]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(request, db, principal, path_int(request, "meeting_id"), Action.SEE)
        return JSONResponse(await _members(db, meeting))


async def add_member_route(request: Request) -> JSONResponse:
    """Add a member by username (the organiser or an admin); adding one twice is harmless.
    ---
    tags: [privacy]
    requestBody: {content: {application/json: {schema: {type: object, required: [username], properties:
      {username: {type: string}}}}}}
    responses:
      201: {description: "{organiser, visibility, members}"}
      409: {description: a dictation has no members}
      422: {description: "no such user (errors: [{field: username}])"}
    """
    principal = await require_user(request)
    username = field(await json_body(request), "username", str).strip()
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), Action.MANAGE, record="member_added"
        )
        if meeting.kind == MeetingKind.DICTATION:
            raise ApiError(409, "dictation", "a dictation is its owner's alone")
        user = (await db.execute(select(User).where(User.username == username))).scalar_one_or_none()
        if user is None:
            raise ApiError(
                422, "invalid", "username: no such user", [{"field": "username", "reason": "unknown"}]
            )
        await add_member(db, meeting.id, user.id, principal.user_id)
        return JSONResponse(await _members(db, meeting), status_code=201)


async def remove_member(request: Request) -> JSONResponse:
    """Remove a member (the organiser or an admin; a member may leave). Their lines stay in the meeting.
    ---
    tags: [privacy]
    responses: {200: {description: "{organiser, visibility, members}"}, 404: {description: not a member}}
    """
    principal = await require_user(request)
    user_id = path_int(request, "user_id")
    action = Action.SEE if user_id == principal.user_id else Action.MANAGE
    async with services(request).db.session() as db:
        meeting = await meeting_for(
            request, db, principal, path_int(request, "meeting_id"), action, record="member_removed"
        )
        if user_id in await _speakers(db, meeting.id):
            raise ApiError(409, "speaker", "whoever spoke in a meeting stays its member")
        row = await db.get(MeetingMember, (meeting.id, user_id))
        if row is None or user_id == meeting.owner_id:
            raise not_found("member")
        await db.delete(row)
        await db.flush()
        return JSONResponse(await _members(db, meeting))


# ----- deletion ---------------------------------------------------------------------------------------
async def end_for_deletion(svc: Services, meeting_id: int) -> None:
    """No new session may start (the meeting is ended), then its live sessions here end: finals flushed,
    ``error`` ``meeting_deleted``, close 1000."""
    async with svc.db.session() as db:
        meeting = await db.get(Meeting, meeting_id)
        if meeting is not None and meeting.status != MeetingStatus.ENDED:
            meeting.status, meeting.ended_at = MeetingStatus.ENDED, meeting.ended_at or utcnow()
    await svc.hub.close_meeting(meeting_id, "meeting deleted", "meeting_deleted")


async def delete_meeting(request: Request) -> JSONResponse:
    """Delete a meeting or a dictation and everything of it (the organiser or an admin): its live sessions
    end first; captions, corrections, notes, viewer links, speakers' names and memberships go in one
    transaction. The access audit keeps its rows about it (no text).
    ---
    tags: [privacy]
    responses: {200: {description: "{deleted: id}"}, 403: {description: not the organiser}}
    """
    principal = await require_user(request)
    svc = services(request)
    meeting_id = path_int(request, "meeting_id")
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.MANAGE)
    await end_for_deletion(svc, meeting_id)
    async with svc.db.session() as db:
        await meeting_for(request, db, principal, meeting_id, Action.MANAGE, record="delete")
        await erase_meeting(db, meeting_id)
    svc.hub.feed.meeting_changed(meeting_id)  # open views re-read it: gone, so `ended`
    log.info("meeting_deleted", meeting_id=meeting_id, by=principal.user_id)
    return JSONResponse({"deleted": meeting_id})


async def delete_for_retention(svc: Services, now_days: int) -> int:
    """Delete every meeting and dictation not live whose last activity (end, else start, else creation) is
    older than ``now_days`` days; returns how many. Each is its own transaction, recorded in the audit."""
    cutoff = utcnow() - timedelta(days=now_days)
    last = func.coalesce(Meeting.ended_at, Meeting.started_at, Meeting.created_at)
    async with svc.db.session() as db:
        ids = list(
            (
                await db.execute(
                    select(Meeting.id).where(last < cutoff, Meeting.status != MeetingStatus.LIVE)
                )
            ).scalars()
        )
    for meeting_id in ids:
        await end_for_deletion(svc, meeting_id)
        async with svc.db.session() as db:
            meeting = await db.get(Meeting, meeting_id)
            if meeting is None:
                continue
            detail = f"retention {now_days} days"
            audit(db, meeting, "delete", None, "-", detail=detail, actor_name="retention", via="system")
            await erase_meeting(db, meeting_id)
        svc.hub.feed.meeting_changed(meeting_id)
    if ids:
        log.info("retention_deleted", meetings=len(ids), days=now_days)
    return len(ids)


async def sweep_retention(svc: Services, days: int, interval_s: float) -> None:
    """The app's retention task: ``delete_for_retention`` now and every ``interval_s`` seconds. A failed
    sweep (the database away) is logged and tried again at the next one."""
    while True:
        try:
            await delete_for_retention(svc, days)
        except Exception:
            log.exception("retention_failed")
        await asyncio.sleep(interval_s)


async def delete_user(request: Request) -> JSONResponse:
    """Delete a user (admins; not oneself): their live sessions end, their dictations (with their notes) are
    deleted as ``DELETE /api/meetings/{id}`` deletes, then the account with its tokens, personal
    vocabularies and memberships. Their lines in others' meetings stay, labelled "Former member"; meetings
    they organised stay without an organiser (admins administer them).
    ---
    tags: [users]
    responses: {200: {description: "{deleted: id, dictations: n}"}, 404: {description: no such user},
      409: {description: yourself}}
    """
    admin = await require_admin(request)
    svc = services(request)
    user_id = path_int(request, "user_id")
    if user_id == admin.user_id:
        raise ApiError(409, "conflict", "you cannot delete your own account")
    async with svc.db.session() as db:
        user = await db.get(User, user_id)
        if user is None:
            raise not_found("user")
        username = user.username
        dictations = list(
            (
                await db.execute(
                    select(Meeting.id).where(
                        Meeting.owner_id == user_id, Meeting.kind == MeetingKind.DICTATION
                    )
                )
            ).scalars()
        )
    speaking = [s for s in svc.hub.sessions.values() if s.username == username]
    await asyncio.gather(*(s.end(1000, "account deleted", "account_deleted") for s in speaking))
    for meeting_id in dictations:
        await end_for_deletion(svc, meeting_id)
    async with svc.db.session() as db:
        for meeting_id in dictations:
            meeting = await db.get(Meeting, meeting_id)
            if meeting is not None:
                audit(db, meeting, "delete", admin, client_address(request), detail="account deleted")
                await erase_meeting(db, meeting_id)
        user = await db.get(User, user_id)
        if user is not None:
            await db.delete(user)
    log.info("user_deleted", user_id=user_id, by_user_id=admin.user_id, dictations=len(dictations))
    return JSONResponse({"deleted": user_id, "dictations": len(dictations)})


# ----- the access audit -------------------------------------------------------------------------------
def audit_dict(row: AccessAudit) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": as_utc(row.created_at).isoformat(),
        "actor": {"user_id": row.actor_id, "name": row.actor_name, "role": row.actor_role},
        "via": row.via,
        "action": row.action,
        "meeting_id": row.meeting_id,
        "kind": row.meeting_kind,
        "owner_id": row.owner_id,
        "admin_access": row.admin_access,
        "address": row.address,
        "detail": row.detail,
    }


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", str(AUDIT_PAGE))
    if not raw.isdigit() or not 1 <= int(raw) <= AUDIT_MAX:
        raise ApiError(422, "invalid", f"limit: 1-{AUDIT_MAX}", [{"field": "limit"}])
    return int(raw)


async def meeting_audit(request: Request) -> JSONResponse:
    """Who read, exported, edited, opened or administered this meeting, the newest first (the organiser or
    an admin). Reads by an admin who is not a member are marked ``admin_access``.
    ---
    tags: [privacy]
    responses: {200: {description: "{entries: [{id, at, actor, via, action, admin_access, address, ...}]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        meeting = await meeting_for(request, db, principal, path_int(request, "meeting_id"), Action.MANAGE)
        query = select(AccessAudit).where(AccessAudit.meeting_id == meeting.id)
        rows = (await db.execute(query.order_by(AccessAudit.id.desc()).limit(_limit(request)))).scalars()
        return JSONResponse({"entries": [audit_dict(r) for r in rows]})


async def _all_entries(request: Request) -> list[AccessAudit]:
    query = select(AccessAudit).order_by(AccessAudit.id.desc()).limit(_limit(request))
    meeting = request.query_params.get("meeting_id")
    if meeting is not None:
        if not meeting.isdigit():
            raise ApiError(422, "invalid", "meeting_id: an id", [{"field": "meeting_id"}])
        query = query.where(AccessAudit.meeting_id == int(meeting))
    async with services(request).db.session() as db:
        return list((await db.execute(query)).scalars())


async def all_audit(request: Request) -> JSONResponse:
    """The whole access audit, the newest first (admins); ``meeting_id`` filters, ``limit`` 1-1000 (200).
    ---
    tags: [privacy]
    responses: {200: {description: "{entries: [...]}"}, 403: {description: admins only}}
    """
    await require_admin(request)
    return JSONResponse({"entries": [audit_dict(r) for r in await _all_entries(request)]})


async def audit_csv(request: Request) -> Response:
    """The access audit as CSV (admins), the same rows as ``GET /api/audit``.
    ---
    tags: [privacy]
    responses: {200: {description: text/csv}}
    """
    await require_admin(request)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in await _all_entries(request):
        d = audit_dict(row)
        writer.writerow([
            d["id"], d["at"], row.actor_id or "", row.actor_name, row.actor_role, d["via"], d["action"],
            d["meeting_id"], d["kind"], row.owner_id or "", str(row.admin_access).lower(), d["address"],
            d["detail"],
        ])  # fmt: skip
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": 'attachment; filename="access-audit.csv"'},
    )


routes = [
    Route("/api/meetings/{meeting_id:int}", delete_meeting, methods=["DELETE"]),
    Route("/api/meetings/{meeting_id:int}/members", list_members, methods=["GET"]),
    Route("/api/meetings/{meeting_id:int}/members", add_member_route, methods=["POST"]),
    Route("/api/meetings/{meeting_id:int}/members/{user_id:int}", remove_member, methods=["DELETE"]),
    Route("/api/meetings/{meeting_id:int}/audit", meeting_audit, methods=["GET"]),
    Route("/api/audit", all_audit, methods=["GET"]),
    Route("/api/audit.csv", audit_csv, methods=["GET"]),
    Route("/api/users/{user_id:int}", delete_user, methods=["DELETE"]),
]
