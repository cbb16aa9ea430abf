"""Vocabularies and their terms: CRUD, bulk edits, import and export."""

from __future__ import annotations

import csv
import io
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.deps import Principal, is_id, path_int, require_user, services
from backend.db.models import Term, Vocabulary, utcnow
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.text.termforms import check_forms
from backend.text.vocab import ItemError, VocabularyTerm, parse_import, parse_term_items, validate_terms


def vocabulary_dict(vocab: Vocabulary, with_terms: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": vocab.id,
        "name": vocab.name,
        "description": vocab.description,
        "owner_id": vocab.owner_id,
        "personal": vocab.owner_id is not None,
        "version": vocab.version,
        "updated_at": vocab.updated_at.isoformat(),
    }
    if with_terms:
        data["terms"] = [term_dict(t) for t in vocab.terms]
        data["term_count"] = len(vocab.terms)
    return data


def term_dict(term: Term) -> dict[str, Any]:
    return {
        "id": term.id,
        "text": term.text,
        "display": term.display,
        "weight": term.weight,
        "alternates": list(term.alternates or []),
    }


def can_read(principal: Principal, vocab: Vocabulary) -> bool:
    return principal.is_admin or vocab.owner_id in (None, principal.user_id)


def can_write(principal: Principal, vocab: Vocabulary) -> bool:
    return principal.is_admin or vocab.owner_id == principal.user_id


async def load_vocabulary(db: AsyncSession, vocab_id: int, principal: Principal, write: bool) -> Vocabulary:
    vocab = (
        await db.execute(
            select(Vocabulary).where(Vocabulary.id == vocab_id).options(selectinload(Vocabulary.terms))
        )
    ).scalar_one_or_none()
    if vocab is None or not can_read(principal, vocab):
        raise not_found("vocabulary")
    if write and not can_write(principal, vocab):
        raise ApiError(403, "forbidden", "only admins edit organisation vocabularies")
    return vocab


def _valid_name(name: str) -> str:
    name = " ".join(name.split())
    if not name or len(name) > 200:
        raise ApiError(422, "invalid", "name: 1-200 characters", [{"field": "name", "reason": "length"}])
    return name


def _term_row(term: VocabularyTerm, raw_text: str) -> Term:
    return Term(
        text=raw_text.strip(),
        normalized=term.key,
        display=term.display,
        weight=term.weight,
        alternates=list(term.alternates),
    )


async def _check(request: Request, inputs: list[tuple[int, VocabularyTerm]], existing: set[str]) -> Any:
    svc = services(request)
    await svc.engine_started()  # the tokenizer decides which terms can be boosted
    well_formed, malformed = check_forms(inputs, svc.term_limits)
    valid, bad = validate_terms(well_formed, svc.term_limits, svc.tokenizer, existing)
    return valid, sorted(malformed + bad, key=lambda e: e.position)


async def list_vocabularies(request: Request) -> JSONResponse:
    """Vocabularies the caller can see (organisation-wide and their own personal lists).
    ---
    tags: [vocabularies]
    responses: {200: {description: "{vocabularies: [...]}"}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        query = select(Vocabulary, func.count(Term.id)).outerjoin(Term).group_by(Vocabulary.id)
        if not principal.is_admin:
            query = query.where(or_(Vocabulary.owner_id.is_(None), Vocabulary.owner_id == principal.user_id))
        rows = (await db.execute(query.order_by(Vocabulary.id))).all()
    return JSONResponse({"vocabularies": [vocabulary_dict(v) | {"term_count": n} for v, n in rows]})


async def create_vocabulary(request: Request) -> JSONResponse:
    """Create a vocabulary (organisation-wide for admins, or personal).
    ---
    tags: [vocabularies]
    requestBody: {content: {application/json: {schema: {type: object, required: [name], properties:
      {name: {type: string}, description: {type: string}, personal: {type: boolean}}}}}}
    responses: {201: {description: "{vocabulary}"}, 422: {description: invalid field}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    name = _valid_name(field(body, "name", str))
    personal = bool(field(body, "personal", bool, required=False)) or not principal.is_admin
    vocab = Vocabulary(
        name=name,
        description=field(body, "description", str, required=False) or "",
        owner_id=principal.user_id if personal else None,
        terms=[],
    )
    async with services(request).db.session() as db:
        db.add(vocab)
        await db.flush()
        data = vocabulary_dict(vocab, with_terms=True)
    return JSONResponse({"vocabulary": data}, status_code=201)


async def get_vocabulary(request: Request) -> JSONResponse:
    """A vocabulary with its terms.
    ---
    tags: [vocabularies]
    responses: {200: {description: "{vocabulary}"}, 404: {description: not found}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=False)
        return JSONResponse({"vocabulary": vocabulary_dict(vocab, with_terms=True)})


async def update_vocabulary(request: Request) -> JSONResponse:
    """Rename or re-describe a vocabulary.
    ---
    tags: [vocabularies]
    responses: {200: {description: "{vocabulary}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        name = field(body, "name", str, required=False)
        if name is not None:
            vocab.name = _valid_name(name)
        description = field(body, "description", str, required=False)
        if description is not None:
            vocab.description = description
        vocab.version += 1
        vocab.updated_at = utcnow()
        await db.flush()
        return JSONResponse({"vocabulary": vocabulary_dict(vocab, with_terms=True)})


async def delete_vocabulary(request: Request) -> Response:
    """Delete a vocabulary and its terms.
    ---
    tags: [vocabularies]
    responses: {204: {description: deleted}}
    """
    principal = await require_user(request)
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        await db.delete(vocab)
    return Response(status_code=204)


async def add_terms(request: Request) -> JSONResponse:
    """Add terms in bulk, all or nothing: 422 lists every bad term with its index and the reason.
    ---
    tags: [vocabularies]
    requestBody: {content: {application/json: {schema: {type: object, required: [terms], properties:
      {terms: {type: array, items: {type: object, properties: {text: {type: string}, weight: {type: number},
      display: {type: string}, alternates: {type: array, items: {type: string}}}}}}}}}}
    responses: {200: {description: "{vocabulary} with the effective normalised terms and the new version"},
      422: {description: "errors: [{index, text, reason}]"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    parsed, errors = parse_term_items(body.get("terms"))
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        valid, bad = await _check(request, parsed, {t.normalized for t in vocab.terms})
        errors += bad
        _check_size(request, len(vocab.terms) + len(valid))
        if errors:
            raise ApiError(
                422,
                "invalid_terms",
                f"{len(errors)} term(s) rejected",
                [e.as_dict("index") for e in sorted(errors, key=lambda e: e.position)],
            )
        texts = dict(parsed)
        for position, term in valid:
            vocab.terms.append(_term_row(term, texts[position].text))
        vocab.version += 1
        vocab.updated_at = utcnow()
        await db.flush()
        return JSONResponse({"vocabulary": vocabulary_dict(vocab, with_terms=True)})


def _check_size(request: Request, count: int) -> None:
    limit = services(request).settings.max_terms_per_vocabulary
    if count > limit:
        raise ApiError(422, "too_many_terms", f"a vocabulary holds at most {limit} terms")


async def update_term(request: Request) -> JSONResponse:
    """Edit one term (text, weight, display form, alternates).
    ---
    tags: [vocabularies]
    responses: {200: {description: "{vocabulary}"}, 422: {description: "errors: [{index, text, reason}]"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    term_id = path_int(request, "term_id")
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        row = next((t for t in vocab.terms if t.id == term_id), None)
        if row is None:
            raise not_found("term")
        merged = {
            "text": row.text,
            "weight": row.weight,
            "display": row.display,
            "alternates": row.alternates,
        } | {k: v for k, v in body.items() if k in {"text", "weight", "display", "alternates"}}
        parsed, errors = parse_term_items([merged])
        valid, bad = await _check(request, parsed, {t.normalized for t in vocab.terms if t.id != term_id})
        if errors or bad:
            raise ApiError(422, "invalid_terms", "term rejected", [e.as_dict("index") for e in errors + bad])
        term = valid[0][1]
        row.text, row.normalized, row.display = parsed[0][1].text.strip(), term.key, term.display
        row.weight, row.alternates = term.weight, list(term.alternates)
        vocab.version += 1
        vocab.updated_at = utcnow()
        await db.flush()
        return JSONResponse({"vocabulary": vocabulary_dict(vocab, with_terms=True)})


async def delete_terms(request: Request) -> JSONResponse:
    """Delete terms in bulk by id.
    ---
    tags: [vocabularies]
    requestBody: {content: {application/json: {schema: {type: object, properties: {ids: {type: array,
      items: {type: integer}}}}}}}
    responses: {200: {description: "{vocabulary, deleted}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    ids = field(body, "ids", list)
    if not all(is_id(i) for i in ids):
        raise ApiError(422, "invalid", "ids: a list of ids", [{"field": "ids", "reason": "type"}])
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        wanted = set(ids)
        doomed = [t for t in vocab.terms if t.id in wanted]
        for term in doomed:
            vocab.terms.remove(term)
        vocab.version += 1
        vocab.updated_at = utcnow()
        await db.flush()
        return JSONResponse({"vocabulary": vocabulary_dict(vocab, with_terms=True), "deleted": len(doomed)})


def _parse_import(fmt: str, content: str) -> tuple[list[tuple[int, VocabularyTerm]], list[ItemError]]:
    """``parse_import`` with a lone CR read as a line break (as ``text`` files already are), and each CSV
    line parsed on its own: a term cannot span lines, so an unclosed (odd) quote is an error on its own
    line instead of swallowing the next ones (such lines are blanked: the numbering stays the file's)."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    malformed: list[ItemError] = []
    if fmt == "csv":
        for index, line in enumerate(lines):
            try:
                list(csv.reader([line], strict=True))
                problem = "an unbalanced quote" if line.count('"') % 2 else None
            except csv.Error as exc:
                problem = str(exc)
            if problem is not None:
                malformed.append(ItemError(index + 1, line, f"malformed CSV: {problem}; quote fields fully"))
                lines[index] = ""
    rows, errors = parse_import(fmt, "\n".join(lines))
    return rows, sorted(errors + malformed, key=lambda e: e.position)


async def import_terms(request: Request) -> JSONResponse:
    """Import a text (one term per line, optional ``term<TAB>weight``) or CSV file. Valid lines are saved;
    every invalid line is reported with its 1-based line number and the reason.
    ---
    tags: [vocabularies]
    requestBody: {content: {application/json: {schema: {type: object, required: [format, content],
      properties: {format: {type: string, enum: [text, csv]}, content: {type: string}}}}}}
    responses: {200: {description: "{imported, errors: [{line, text, reason}], vocabulary}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    fmt = field(body, "format", str)
    if fmt not in {"text", "csv"}:
        raise ApiError(422, "invalid", "format: text or csv", [{"field": "format", "reason": "enum"}])
    rows, errors = _parse_import(fmt, field(body, "content", str))
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=True)
        valid, bad = await _check(request, rows, {t.normalized for t in vocab.terms})
        _check_size(request, len(vocab.terms) + len(valid))
        texts = dict(rows)
        for line, term in valid:
            vocab.terms.append(_term_row(term, texts[line].text))
        if valid:
            vocab.version += 1
            vocab.updated_at = utcnow()
        await db.flush()
        all_errors = sorted(errors + bad, key=lambda e: e.position)
        return JSONResponse(
            {
                "imported": len(valid),
                "errors": [e.as_dict("line") for e in all_errors],
                "vocabulary": vocabulary_dict(vocab, with_terms=True),
            }
        )


async def export_terms(request: Request) -> Response:
    """Export the terms as text (``term<TAB>weight``) or CSV (text, weight, display, alternates).
    ---
    tags: [vocabularies]
    parameters: [{name: format, in: query, schema: {type: string, enum: [text, csv]}}]
    responses: {200: {description: the file}}
    """
    principal = await require_user(request)
    fmt = request.query_params.get("format", "text")
    async with services(request).db.session() as db:
        vocab = await load_vocabulary(db, path_int(request, "vocab_id"), principal, write=False)
        terms = list(vocab.terms)
        name = vocab.name
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["text", "weight", "display", "alternates"])
        for t in terms:
            writer.writerow([t.text, t.weight, t.display or "", "|".join(t.alternates or [])])
        content, media, ext = out.getvalue(), "text/csv", "csv"
    elif fmt == "text":
        content = "".join(f"{t.text}\t{t.weight:g}\n" for t in terms)
        media, ext = "text/plain", "txt"
    else:
        raise ApiError(422, "invalid", "format: text or csv", [{"field": "format", "reason": "enum"}])
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60] or "vocabulary"
    return Response(
        content,
        media_type=f"{media}; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{safe}.{ext}"'},
    )


routes = [
    Route("/api/vocabularies", list_vocabularies, methods=["GET"]),
    Route("/api/vocabularies", create_vocabulary, methods=["POST"]),
    Route("/api/vocabularies/{vocab_id:int}", get_vocabulary, methods=["GET"]),
    Route("/api/vocabularies/{vocab_id:int}", update_vocabulary, methods=["PATCH"]),
    Route("/api/vocabularies/{vocab_id:int}", delete_vocabulary, methods=["DELETE"]),
    Route("/api/vocabularies/{vocab_id:int}/terms", add_terms, methods=["POST"]),
    Route("/api/vocabularies/{vocab_id:int}/terms/delete", delete_terms, methods=["POST"]),
    Route("/api/vocabularies/{vocab_id:int}/terms/{term_id:int}", update_term, methods=["PATCH"]),
    Route("/api/vocabularies/{vocab_id:int}/import", import_terms, methods=["POST"]),
    Route("/api/vocabularies/{vocab_id:int}/export", export_terms, methods=["GET"]),
]
