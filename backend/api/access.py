"""Who may do what with a meeting or a dictation: the one place every route that returns or changes meeting
content asks (docs/protocol.md, "Who sees a meeting", is this module's table in words).

A meeting has an organiser (its owner) and members (added by the organiser or an admin, or by speaking in
it). It is private unless the organiser makes it visible to the whole organisation. A dictation is its
owner's alone. Anyone else gets 404, as for a meeting that does not exist: existence is not disclosed.
Admins administer every meeting (members, visibility, deletion) but reading content they neither organise
nor belong to is recorded in the access audit (``admin_access``), and refused when
``CAPTIONS_ADMINS_READ_CONTENT`` is false. API tokens act as their owner; a read-only token's unsafe
requests were refused before any of this (``backend.api.deps``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, exists, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from starlette.requests import Request

from backend.api.deps import Principal, services
from backend.db.models import AccessAudit, Meeting, MeetingKind, MeetingMember, StreamSession, utcnow
from backend.edge.errors import ApiError, not_found

ORGANISATION = "organisation"
PRIVATE = "private"
VISIBILITIES = (PRIVATE, ORGANISATION)


class Action(enum.StrEnum):
    """What a caller wants with a meeting. The value of a content action is its audit ``action``."""

    SEE = "see"  # its row: title, status, settings (GET /api/meetings/{id}, the lists)
    READ = "read"  # its content: transcript, captions as JSON, speakers, a line's history
    EXPORT = "export"  # its caption files (WebVTT, SRT, text)
    OPEN = "ticket"  # a ticket to speak into it (/ws) or watch it (/ws/view)
    EDIT = "edit"  # correct a line, merge or rename speakers
    MANAGE = "manage"  # start, end, settings, vocabularies, members, visibility, viewer links, audit, delete
    NOTE = "note"  # a dictation's note (drafts): its owner only, an admin neither


CONTENT = frozenset({Action.READ, Action.EXPORT, Action.OPEN, Action.EDIT})
"""The actions that reach content: always recorded in the access audit."""


@dataclass(frozen=True)
class Standing:
    """How the caller stands to one meeting."""

    organiser: bool
    member: bool
    organisation: bool  # a meeting (not a dictation) the organiser made visible to every account
    admin: bool

    @property
    def reader(self) -> bool:
        return self.organiser or self.member or self.organisation


@dataclass(frozen=True)
class Verdict:
    """``status`` 0: allowed; else the HTTP status and code to refuse with. ``admin_access``: allowed only
    because the caller is an admin (recorded as such)."""

    status: int = 0
    code: str = ""
    admin_access: bool = False

    @property
    def allowed(self) -> bool:
        return self.status == 0


ALLOWED = Verdict()
HIDDEN = Verdict(404, "not_found")
NOT_ORGANISER = Verdict(403, "forbidden")
ADMIN_REFUSED = Verdict(403, "admin_read_refused")


def decide(standing: Standing, action: Action, admins_read_content: bool) -> Verdict:
    """The rule table (docs/protocol.md): pure, so it is tested row by row."""
    if action == Action.NOTE:
        return ALLOWED if standing.organiser else HIDDEN
    if not standing.reader and not standing.admin:
        return HIDDEN
    if action == Action.SEE:
        return ALLOWED
    if action == Action.MANAGE:
        return ALLOWED if standing.organiser or standing.admin else NOT_ORGANISER
    if action == Action.EDIT and not standing.organiser and not standing.admin:
        return NOT_ORGANISER
    if standing.organiser or (standing.reader and action != Action.EDIT):
        return ALLOWED
    if standing.reader:  # an admin editing a meeting they may read: an admin's right, not a silent read
        return ALLOWED
    return Verdict(admin_access=True) if admins_read_content else ADMIN_REFUSED


async def standing(db: AsyncSession, meeting: Meeting, principal: Principal) -> Standing:
    """The caller's standing in ``meeting``."""
    organiser = meeting.owner_id == principal.user_id
    member = False
    if not organiser and meeting.kind == MeetingKind.MEETING:
        found = await db.execute(
            select(Meeting.id).where(Meeting.id == meeting.id, member_of(principal.user_id))
        )
        member = found.scalar() is not None
    organisation = meeting.kind == MeetingKind.MEETING and meeting.visibility == ORGANISATION
    return Standing(organiser, member, organisation, principal.is_admin)


async def meeting_for(
    request: Request,
    db: AsyncSession,
    principal: Principal,
    meeting_id: int,
    action: Action,
    record: str | None = None,
    detail: str = "",
) -> Meeting:
    """The meeting if ``principal`` may do ``action`` with it, else the refusal (404 for anyone who may not
    know it exists). A content action is recorded in the access audit, in ``db``'s transaction (so a
    request that fails later records nothing); ``record`` names another action to record (``delete``)."""
    meeting = (
        await db.execute(
            select(Meeting).where(Meeting.id == meeting_id).options(selectinload(Meeting.vocabularies))
        )
    ).scalar_one_or_none()
    if meeting is None:
        raise not_found("meeting")
    settings = services(request).settings
    verdict = decide(await standing(db, meeting, principal), action, settings.admins_read_content)
    if verdict.status == 404:
        raise not_found("meeting")
    if verdict.code == "admin_read_refused":
        raise ApiError(
            403, "admin_read_refused", "admins may not read the content of others' meetings on this server"
        )
    if not verdict.allowed:
        raise ApiError(403, "forbidden", "only the meeting's organiser or an admin may do this")
    name = record or (action.value if action in CONTENT else None)
    if name is not None:
        audit(db, meeting, name, principal, client_address(request), verdict.admin_access, detail)
    return meeting


def client_address(request: Request) -> str:
    """The caller's address as uvicorn reports it (a trusted proxy's ``X-Forwarded-For`` applied)."""
    return request.client.host if request.client else "-"


def audit(
    db: AsyncSession,
    meeting: Meeting,
    action: str,
    principal: Principal | None,
    address: str,
    admin_access: bool = False,
    detail: str = "",
    actor_name: str | None = None,
    via: str | None = None,
) -> None:
    """Append one row to the access audit (never caption text: ``detail`` is a format or a label). Without
    a ``principal`` the actor is ``actor_name`` (a viewer link, the retention sweep)."""
    db.add(
        AccessAudit(
            created_at=utcnow(),
            actor_id=principal.user_id if principal else None,
            actor_name=(actor_name or (principal.username if principal else "-"))[:64],
            actor_role=principal.role.value if principal else "guest",
            via=via or (("token" if principal.token_id is not None else "cookie") if principal else "link"),
            action=action,
            meeting_id=meeting.id,
            meeting_kind=meeting.kind.value,
            owner_id=meeting.owner_id,
            admin_access=admin_access,
            address=address[:64],
            detail=detail[:100],
        )
    )


def readable(principal: Principal) -> Any:
    """SQL: the meetings whose content the caller may read without an admin's right: those they organise or
    belong to, and the meetings visible to the organisation. Lists of content and search use it (an admin
    searches and previews only these too: no silent reads)."""
    return or_(
        Meeting.owner_id == principal.user_id,
        and_(
            Meeting.kind == MeetingKind.MEETING,
            or_(member_of(principal.user_id), Meeting.visibility == ORGANISATION),
        ),
    )


def member_of(user_id: int) -> Any:
    """SQL, correlated with ``meetings``: ``user_id`` is a member of the meeting: added (``meeting_members``)
    or one of its speakers (a stream session of theirs: whoever spoke in a meeting stays its member)."""
    added = exists().where(MeetingMember.meeting_id == Meeting.id, MeetingMember.user_id == user_id)
    spoke = exists().where(StreamSession.meeting_id == Meeting.id, StreamSession.user_id == user_id)
    return or_(added, spoke)


def listable(principal: Principal) -> Any:
    """SQL: the meetings whose row the caller may see (``Action.SEE``): an admin every one (to administer
    it), anyone else the readable ones."""
    return true() if principal.is_admin else readable(principal)
