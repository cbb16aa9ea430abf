"""REST API, in process, on the fake engine: auth, CSRF, vocabularies, import/export, meetings, OpenAPI."""

from __future__ import annotations

import csv
import io

from starlette.routing import Route
from starlette.testclient import TestClient

from backend.config import Settings


def _vocabulary(admin: TestClient, name: str = "Pharmacy") -> int:
    response = admin.post("/api/vocabularies", json={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["vocabulary"]["id"]


def test_unauthenticated_calls_are_rejected(client: TestClient) -> None:
    assert client.get("/api/vocabularies").status_code == 401
    assert client.post("/api/meetings", json={"title": "x"}).status_code == 401
    assert client.get("/api/live").status_code == 401


def test_cookie_session_requires_csrf_on_unsafe_methods(admin: TestClient) -> None:
    token = admin.headers.pop("x-csrf-token")
    response = admin.post("/api/vocabularies", json={"name": "No CSRF"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf"
    admin.headers["x-csrf-token"] = "wrong"
    assert admin.post("/api/vocabularies", json={"name": "Wrong CSRF"}).status_code == 403
    admin.headers["x-csrf-token"] = token
    assert admin.post("/api/vocabularies", json={"name": "With CSRF"}).status_code == 201


def test_wrong_password_and_rate_limit(client: TestClient) -> None:
    for _ in range(5):
        assert (
            client.post("/api/auth/login", json={"username": "admin", "password": "nope"}).status_code == 401
        )
    blocked = client.post("/api/auth/login", json={"username": "admin", "password": "nope"})
    assert blocked.status_code == 429


def test_api_token_works_without_csrf(admin: TestClient, client: TestClient) -> None:
    token = admin.post("/api/tokens", json={"name": "script"}).json()["token"]
    client.cookies.clear()
    client.headers.pop("x-csrf-token", None)
    response = client.post(
        "/api/vocabularies", json={"name": "Scripted"}, headers={"authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201
    bad = client.get("/api/vocabularies", headers={"authorization": "Bearer nope"})
    assert bad.status_code == 401


def test_bulk_add_is_all_or_nothing_with_per_term_errors(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    response = admin.post(
        f"/api/vocabularies/{vocab_id}/terms",
        json={"terms": ["linezolid", {"text": "bad\u0007bell"}, {"text": "ok", "weight": 99}, {"nope": 1}]},
    )
    assert response.status_code == 422
    errors = response.json()["error"]["errors"]
    assert [e["index"] for e in errors] == [1, 2, 3]
    assert all(e["reason"] for e in errors)
    assert admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]["terms"] == []


def test_weights_outside_the_boost_levels_are_refused_naming_the_term(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    for weight in (0.4, 2.5, 10):
        response = admin.post(
            f"/api/vocabularies/{vocab_id}/terms", json={"terms": [{"text": "Halvorsen", "weight": weight}]}
        )
        assert response.status_code == 422
        (error,) = response.json()["error"]["errors"]
        assert error["text"] == "Halvorsen"
        assert f"weight {weight:g} is outside the accepted range 0.5 to 2" in error["reason"]
    added = admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["alpha"]}).json()
    term_id = added["vocabulary"]["terms"][0]["id"]
    edited = admin.patch(f"/api/vocabularies/{vocab_id}/terms/{term_id}", json={"weight": 10})
    assert edited.status_code == 422 and "alpha" in edited.text
    imported = admin.post(
        f"/api/vocabularies/{vocab_id}/import",
        json={"format": "csv", "content": "text,weight\nHalvorsen,2.0\nHalverson,10\n"},
    )
    report = imported.json()
    assert [line["text"] for line in report["errors"]] == ["Halverson"], report
    stored = admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]["terms"]
    assert {t["text"]: t["weight"] for t in stored} == {"alpha": 1.0, "Halvorsen": 2.0}


def test_terms_are_normalised_deduplicated_and_versioned(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    before = admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]["version"]
    response = admin.post(
        f"/api/vocabularies/{vocab_id}/terms",
        json={"terms": [{"text": "  Husqvarna   AB ", "display": "Husqvarna AB", "weight": 2}]},
    )
    assert response.status_code == 200, response.text
    vocab = response.json()["vocabulary"]
    assert vocab["version"] == before + 1
    assert vocab["terms"][0]["weight"] == 2
    duplicate = admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["husqvarna ab"]})
    assert duplicate.status_code == 422
    assert "duplicate" in duplicate.json()["error"]["errors"][0]["reason"]


def test_sql_injection_text_is_stored_literally(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin, "Robert'); DROP TABLE vocabularies;--")
    admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["'; DROP TABLE terms--"]})
    vocab = admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]
    assert vocab["name"] == "Robert'); DROP TABLE vocabularies;--"
    assert vocab["terms"][0]["text"] == "'; DROP TABLE terms--"


def test_import_saves_valid_lines_and_reports_bad_ones(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    content = "linezolid\t2\n# comment\n\nbad\u0000term\nvancomycin\nbroken\tweight\n"
    response = admin.post(f"/api/vocabularies/{vocab_id}/import", json={"format": "text", "content": content})
    assert response.status_code == 200
    body = response.json()
    assert body["imported"] == 2
    assert [e["line"] for e in body["errors"]] == [4, 6]
    texts = sorted(t["text"] for t in body["vocabulary"]["terms"])
    assert texts == ["linezolid", "vancomycin"]


def test_csv_import_and_export_round_trip(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    content = "text,weight,display,alternates\nacme corp,1.5,ACME Corp.,akme corp|acmee\nzeta,1,,\n"
    body = admin.post(
        f"/api/vocabularies/{vocab_id}/import", json={"format": "csv", "content": content}
    ).json()
    assert body["imported"] == 2 and body["errors"] == []
    exported = admin.get(f"/api/vocabularies/{vocab_id}/export?format=csv")
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert rows[0] == {
        "text": "acme corp",
        "weight": "1.5",
        "display": "ACME Corp.",
        "alternates": "akme corp|acmee",
    }
    text_export = admin.get(f"/api/vocabularies/{vocab_id}/export?format=text").text
    assert text_export.splitlines() == ["acme corp\t1.5", "zeta\t1"]


def test_edit_and_delete_terms(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    terms = admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["alpha", "beta"]}).json()
    alpha, beta = terms["vocabulary"]["terms"]
    edited = admin.patch(f"/api/vocabularies/{vocab_id}/terms/{alpha['id']}", json={"weight": 1.5})
    assert edited.status_code == 200
    assert edited.json()["vocabulary"]["terms"][0]["weight"] == 1.5
    clash = admin.patch(f"/api/vocabularies/{vocab_id}/terms/{alpha['id']}", json={"text": "BETA"})
    assert clash.status_code == 422
    deleted = admin.post(f"/api/vocabularies/{vocab_id}/terms/delete", json={"ids": [beta["id"]]})
    assert deleted.json()["deleted"] == 1
    assert [t["text"] for t in deleted.json()["vocabulary"]["terms"]] == ["alpha"]


def test_meeting_lifecycle_compiles_vocabulary_at_start(admin: TestClient, fake_engine) -> None:
    vocab_id = _vocabulary(admin)
    admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["linezolid"]})
    created = admin.post(
        "/api/meetings",
        json={"title": "Ward round", "chunk_s": 0.56, "decoding": "beam", "vocabulary_ids": [vocab_id]},
    )
    assert created.status_code == 201, created.text
    meeting = created.json()["meeting"]
    assert (meeting["chunk_s"], meeting["decoding"], meeting["status"]) == (0.56, "beam", "scheduled")
    started = admin.post(f"/api/meetings/{meeting['id']}/start")
    assert started.json()["meeting"]["status"] == "live"
    assert fake_engine.loaded_vocabularies == [["linezolid"]]
    assert len(fake_engine.live_handles) == 1
    ended = admin.post(f"/api/meetings/{meeting['id']}/end")
    assert ended.json()["meeting"]["status"] == "ended"
    assert fake_engine.live_handles == set()
    assert admin.post(f"/api/meetings/{meeting['id']}/ticket").status_code == 409


def test_meetings_and_dictations_default_to_the_configured_decoding(
    admin: TestClient, settings: Settings
) -> None:
    assert admin.post("/api/meetings", json={"title": "a"}).json()["meeting"]["decoding"] == "beam"
    assert admin.post("/api/dictations", json={}).json()["meeting"]["decoding"] == "beam"
    settings.default_decoding = "greedy"
    assert admin.post("/api/meetings", json={"title": "b"}).json()["meeting"]["decoding"] == "greedy"
    assert admin.post("/api/dictations", json={}).json()["meeting"]["decoding"] == "greedy"


def test_meeting_validation(admin: TestClient) -> None:
    bad_chunk = admin.post("/api/meetings", json={"title": "x", "chunk_s": 0.64})
    assert bad_chunk.status_code == 422
    bad_vocab = admin.post("/api/meetings", json={"title": "x", "vocabulary_ids": [999]})
    assert bad_vocab.status_code == 422


def test_every_route_is_in_the_openapi_document(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    documented = {(path, method.upper()) for path, ops in document["paths"].items() for method in ops}
    for route in client.app.routes:
        if isinstance(route, Route) and route.include_in_schema:
            path = route.path.replace(":int", "")
            for method in route.methods - {"HEAD"}:
                assert (path, method) in documented, (path, method)


def test_members_cannot_use_admin_routes_and_see_only_their_lists(
    admin: TestClient, client: TestClient
) -> None:
    created = admin.post(
        "/api/users", json={"username": "nurse", "password": "long enough pw", "role": "member"}
    )
    assert created.status_code == 201
    assert (
        admin.post("/api/users", json={"username": "nurse", "password": "long enough pw"}).status_code == 409
    )
    org = _vocabulary(admin, "Organisation")
    client.cookies.clear()
    login = client.post("/api/auth/login", json={"username": "nurse", "password": "long enough pw"})
    client.headers["x-csrf-token"] = login.json()["csrf_token"]
    assert client.get("/api/live").status_code == 403
    assert client.post("/api/users", json={"username": "x", "password": "long enough pw"}).status_code == 403
    own = client.post("/api/meetings", json={"title": "Handover"})  # members open their own (issue 30)
    assert own.status_code == 201 and own.json()["meeting"]["owner_id"] == created.json()["user"]["id"]
    assert client.post(f"/api/vocabularies/{org}/terms", json={"terms": ["x"]}).status_code == 403
    mine = client.post("/api/vocabularies", json={"name": "My drugs"}).json()["vocabulary"]
    assert mine["personal"] is True
    dictation = client.post("/api/dictations", json={}).json()["meeting"]
    assert dictation["kind"] == "dictation" and dictation["vocabulary_ids"] == [mine["id"]]
    assert client.post(f"/api/meetings/{dictation['id']}/ticket").status_code == 200


def test_term_hits_filtered_by_vocabulary_count_only_its_meetings(
    admin: TestClient, settings: Settings
) -> None:
    """Two pharmacies' lists both hold linezolid: each list's hits are those of the meetings using it."""
    import asyncio

    from backend.db.models import CaptionSegment, StreamSession, utcnow
    from backend.db.session import Database

    lists = [_vocabulary(admin, name) for name in ("North", "South")]
    meetings = []
    for vocab_id in lists:
        added = admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["linezolid"]})
        assert added.status_code == 200, added.text
        body = {"title": f"Round {vocab_id}", "vocabulary_ids": [vocab_id]}
        meetings.append(admin.post("/api/meetings", json=body).json()["meeting"]["id"])

    async def captions() -> None:
        db = Database(settings.database_url)
        async with db.session() as session:
            for meeting_id, count in zip(meetings, (2, 1), strict=True):
                stream = f"session-{meeting_id}"
                session.add(
                    StreamSession(
                        id=stream, meeting_id=meeting_id, resume_token_hash="-", resume_expires_at=utcnow()
                    )
                )
                await session.flush()
                session.add_all(
                    CaptionSegment(
                        meeting_id=meeting_id,
                        session_id=stream,
                        seq=n,
                        text="linezolid",
                        start_s=0.0,
                        end_s=1.0,
                        words=[],
                        matched_terms=["linezolid"],
                    )
                    for n in range(count)
                )
        await db.dispose()

    asyncio.run(captions())
    hits = {
        vocab_id: admin.get(f"/api/stats/terms?vocabulary_id={vocab_id}").json()["terms"][0]["hits"]
        for vocab_id in lists
    }
    assert hits == {lists[0]: 2, lists[1]: 1}
    assert admin.get(f"/api/stats/terms?meeting_id={meetings[1]}").json()["terms"][0]["hits"] == 1
