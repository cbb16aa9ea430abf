"""Live sessions on this replica, and term hit statistics."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import selectinload
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.deps import is_id, require_admin, services
from backend.db.models import CaptionSegment, Vocabulary, meeting_vocabularies
from backend.db.queries import meeting_with_terms
from backend.edge.errors import ApiError, not_found


async def list_live(request: Request) -> JSONResponse:
    """Active streaming sessions on this replica, and its load (the degradation ladder's rung).
    ---
    tags: [live]
    responses: {200: {description: "{sessions: [...], load: {rung, state, message}}"}}
    """
    await require_admin(request)
    hub = services(request).hub
    return JSONResponse(
        {
            "sessions": [
                {
                    "session_id": s.session_id,
                    "meeting_id": s.meeting_id,
                    "meeting_title": s.live.title if s.live else "",
                    "username": s.username,
                    "chunk_s": s.chunk_s,
                    "lag_s": round(s.lag_s, 3),
                    "partials": s.partials,
                    "finals": s.finals,
                    "started_at": s.started_at.isoformat(),
                }
                for s in hub.sessions.values()
            ],
            "load": services(request).ladder.snapshot(),
        }
    )


async def end_live(request: Request) -> JSONResponse:
    """End one live session (its finals are flushed and persisted first).
    ---
    tags: [live]
    responses: {200: {description: ended}, 404: {description: no such live session}}
    """
    await require_admin(request)
    session = services(request).hub.sessions.get(request.path_params["session_id"])
    if session is None:
        raise not_found("live session")
    await session.end(1000, "ended by an admin")
    return JSONResponse({"ended": session.session_id})


def _int_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or not is_id(int(raw)):
        raise ApiError(422, "invalid", f"{name}: an id", [{"field": name}])
    return int(raw)


async def term_stats(request: Request) -> JSONResponse:
    """How often each term was matched in finals, per meeting and/or vocabulary (0 hits listed too).
    ---
    tags: [live]
    parameters: [{name: meeting_id, in: query, schema: {type: integer}},
      {name: vocabulary_id, in: query, schema: {type: integer}}]
    responses: {200: {description: "{terms: [{vocabulary_id, term, display, hits}]}"}}
    """
    await require_admin(request)
    meeting_id = _int_param(request, "meeting_id")
    vocabulary_id = _int_param(request, "vocabulary_id")
    async with services(request).db.session() as db:
        if meeting_id is not None:
            meeting = await meeting_with_terms(db, meeting_id)
            if meeting is None:
                raise not_found("meeting")
            vocabularies = [v for v in meeting.vocabularies if vocabulary_id in (None, v.id)]
        else:
            query = select(Vocabulary).options(selectinload(Vocabulary.terms))
            if vocabulary_id is not None:
                query = query.where(Vocabulary.id == vocabulary_id)
            vocabularies = list((await db.execute(query)).scalars())
        segments = select(CaptionSegment.matched_terms)
        if meeting_id is not None:
            segments = segments.where(CaptionSegment.meeting_id == meeting_id)
        elif vocabulary_id is not None:  # hits in the meetings that use this vocabulary, not in every meeting
            using = select(meeting_vocabularies.c.meeting_id).where(
                meeting_vocabularies.c.vocabulary_id == vocabulary_id
            )
            segments = segments.where(CaptionSegment.meeting_id.in_(using))
        hits: Counter[str] = Counter()
        for (matched,) in (await db.execute(segments)).all():
            hits.update(m.casefold() for m in matched or [])
    rows = [
        {
            "vocabulary_id": v.id,
            "term": t.text,
            "display": t.display,
            "hits": hits[(t.display or t.text).casefold()],
        }
        for v in vocabularies
        for t in v.terms
    ]
    return JSONResponse({"terms": sorted(rows, key=lambda r: (r["hits"], r["term"].casefold()))})


routes = [
    Route("/api/live", list_live, methods=["GET"]),
    Route("/api/live/{session_id}", end_live, methods=["DELETE"]),
    Route("/api/stats/terms", term_stats, methods=["GET"]),
]
