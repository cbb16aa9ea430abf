"""REST defects an outside probe found (issue 29), in process on the fake engine: each was a 500."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from backend.edge.jsonlimits import ClientJsonError, loads, nesting_depth


def _vocabulary(admin: TestClient) -> int:
    return admin.post("/api/vocabularies", json={"name": "Probe"}).json()["vocabulary"]["id"]


def _post_raw(admin: TestClient, url: str, body: str) -> tuple[int, dict[str, object]]:
    response = admin.post(url, content=body.encode(), headers={"content-type": "application/json"})
    return response.status_code, response.json()


@pytest.mark.parametrize(
    ("url", "body", "path"),
    [
        ("/api/vocabularies/{v}/terms", '{"terms": ["ab\\ud800cd"]}', "terms[0]"),
        (
            "/api/vocabularies/{v}/terms",
            '{"terms": [{"text": "a", "display": "\\udfff"}]}',
            "terms[0].display",
        ),
        ("/api/vocabularies", '{"name": "x\\ud800"}', "name"),
        ("/api/meetings", '{"title": "\\udc00"}', "title"),
        ("/api/users", '{"username": "\\ud800", "password": "long enough password"}', "username"),
    ],
)
def test_a_lone_surrogate_in_any_string_field_is_a_typed_422(
    admin: TestClient, url: str, body: str, path: str
) -> None:
    status, answer = _post_raw(admin, url.format(v=_vocabulary(admin)), body)
    assert status == 422
    assert answer["error"]["errors"] == [{"field": path, "reason": "unicode"}]


def test_a_valid_surrogate_pair_is_an_ordinary_character(admin: TestClient) -> None:
    status, answer = _post_raw(admin, "/api/vocabularies", '{"name": "smile \\ud83d\\ude00"}')
    assert status == 201, answer


@pytest.mark.parametrize("big", ["99999999999999999999999", str(2**31)])
def test_ids_beyond_the_id_columns_are_404_not_500(admin: TestClient, big: str) -> None:
    assert admin.get(f"/api/vocabularies/{big}").status_code == 404
    assert admin.get(f"/api/meetings/{big}").status_code == 404
    assert admin.get(f"/api/stats/terms?meeting_id={big}").status_code == 422
    listed = admin.post("/api/meetings", json={"title": "t", "vocabulary_ids": [2**31]})
    assert listed.status_code == 422
    status, answer = _post_raw(
        admin, "/api/meetings", '{"title": "t", "vocabulary_ids": [99999999999999999999]}'
    )
    assert status == 400 and "out of range" in answer["error"]["message"]


def test_a_body_nested_5000_deep_is_a_typed_400(admin: TestClient) -> None:
    status, answer = _post_raw(admin, "/api/vocabularies", '{"name": ' + "[" * 5000 + "]" * 5000 + "}")
    assert status == 400
    assert answer["error"]["code"] == "bad_json" and "nested deeper" in answer["error"]["message"]


def test_csv_import_with_a_lone_carriage_return_keeps_the_valid_lines(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    response = admin.post(
        f"/api/vocabularies/{vocab_id}/import", json={"format": "csv", "content": "alpha,1\nfoo\rbar,1\n"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["imported"] == 3
    terms = admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]["terms"]
    assert sorted(t["text"] for t in terms) == ["alpha", "bar", "foo"]


def test_nesting_depth_skips_brackets_inside_strings() -> None:
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}', 32) == 3
    assert nesting_depth('["\\"[[["]', 32) == 1
    assert loads('{"a": [1, {"b": "]"}]}') == {"a": [1, {"b": "]"}]}
    with pytest.raises(ClientJsonError):
        loads("[" * 33 + "]" * 33)
    assert loads("[" * 32 + "]" * 32) is not None


@pytest.mark.parametrize("display", ["nul\u0000", "evil\u202etxt", "x" * 10_000, "two\nlines"])
def test_display_forms_are_validated_like_terms(admin: TestClient, display: str) -> None:
    vocab_id = _vocabulary(admin)
    added = admin.post(
        f"/api/vocabularies/{vocab_id}/terms", json={"terms": [{"text": "ok", "display": display}]}
    )
    assert added.status_code == 422
    assert "display form" in added.json()["error"]["errors"][0]["reason"]
    good = admin.post(
        f"/api/vocabularies/{vocab_id}/terms", json={"terms": [{"text": "ok", "display": "OK"}]}
    )
    term_id = good.json()["vocabulary"]["terms"][0]["id"]
    patched = admin.patch(f"/api/vocabularies/{vocab_id}/terms/{term_id}", json={"display": display})
    assert patched.status_code == 422


def test_a_term_with_a_line_break_is_rejected_not_split_on_export(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    response = admin.post(f"/api/vocabularies/{vocab_id}/terms", json={"terms": ["fine", "two\nlines"]})
    assert response.status_code == 422
    assert [e["index"] for e in response.json()["error"]["errors"]] == [1]
    imported = admin.post(
        f"/api/vocabularies/{vocab_id}/import", json={"format": "csv", "content": 'alpha,1\n"two\nlines",1\n'}
    )
    assert imported.json()["imported"] == 1
    assert [e["line"] for e in imported.json()["errors"]] == [2, 3]


def test_an_unclosed_csv_quote_is_an_error_on_its_own_line(admin: TestClient) -> None:
    vocab_id = _vocabulary(admin)
    content = 'alpha,1\n"beta,2\ngamma,1.5\n'
    imported = admin.post(f"/api/vocabularies/{vocab_id}/import", json={"format": "csv", "content": content})
    assert imported.status_code == 200, imported.text
    assert imported.json()["imported"] == 2
    assert [(e["line"], e["text"]) for e in imported.json()["errors"]] == [(2, '"beta,2')]
    terms = admin.get(f"/api/vocabularies/{vocab_id}").json()["vocabulary"]["terms"]
    assert sorted(t["text"] for t in terms) == ["alpha", "gamma"]
