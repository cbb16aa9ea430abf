"""Request bodies are capped per route while they are read (issue 36 item 1), against a real server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.edge.jsonlimits import nesting_depth
from tests.sessions.test_protocol import meeting
from tests.support.fake_engine import FakeEngine
from tests.support.server import LiveServer, login, make_settings
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow

ANONYMOUS = ["/api/viewer-links/open", "/api/invites/check", "/api/auth/login"]
MB = 1024 * 1024


def token_body(size_bytes: int) -> bytes:
    return b'{"token": "' + b"a" * (size_bytes - 13) + b'"}'


def chunks_of(body: bytes, size: int = 65536) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(make_settings(tmp_path_factory.mktemp("bodies"))) as server:
        yield server


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path", ANONYMOUS)
def test_a_16_mb_anonymous_body_is_a_typed_413_and_costs_no_memory(
    process: ServerProcess, path: str, chunked: bool
) -> None:
    """The probe's 16 MB body cost +1.95 GB and ~2 s of event loop; now the server's peak resident memory
    grows by less than 100 MB, and /healthz answers while it arrives."""
    body = token_body(16 * MB)
    process.reset_peak_memory()
    before_kib = process.memory_kib()["VmRSS"]
    began = time.monotonic()
    with httpx.Client(base_url=process.base_url, timeout=30) as client:
        response = client.post(
            path,
            content=chunks_of(body) if chunked else body,
            headers={"content-type": "application/json"},
        )
    elapsed_s = time.monotonic() - began
    grown_mb = (process.memory_kib()["VmHWM"] - before_kib) / 1024
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert error["errors"] == [{"field": "body", "reason": "too long", "max_bytes": 8192}]
    assert grown_mb < 100, f"peak memory grew {grown_mb:.0f} MB"
    assert elapsed_s < 5
    assert httpx.get(process.base_url + "/healthz").status_code == 200


def test_every_route_has_a_cap_that_fits_it(tmp_path: Path) -> None:
    """Anonymous routes take a few KB, ordinary ones 64 KiB, a vocabulary's bulk list 8 MiB, a dictation
    note its 100,000 characters; each refuses one byte more, declared or chunked."""
    with LiveServer(make_settings(tmp_path), FakeEngine()) as server:
        api, meeting_id = meeting(server)
        vocab_id = api.post("/api/vocabularies", json={"name": "v"}).json()["vocabulary"]["id"]
        cases = {
            f"/api/meetings/{meeting_id}": (65536, "PATCH"),
            f"/api/vocabularies/{vocab_id}/terms": (8 * MB, "POST"),
            "/api/invites/accept": (8192, "POST"),
        }
        for path, (cap, method) in cases.items():
            for content in (b" " * (cap + 1), chunks_of(b" " * (cap + 1))):
                response = api.request(method, path, content=content)
                assert response.status_code == 413, (path, response.text)
                assert response.json()["error"]["errors"][0]["max_bytes"] == cap
            fits = api.request(method, path, content=b" " * (cap - 2) + b"{}")
            assert fits.status_code != 413, path
        admin = login(server.base_url)
        assert admin.get("/api/auth/me").status_code == 200  # the connection survived the refusals


def test_the_nesting_scan_holds_no_memory_per_character() -> None:
    import resource

    raw = '{"token": "' + "a" * (16 * MB) + '", "b": "' + "\\n" * MB + '", "c": [[1]]}'
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert nesting_depth(raw, 32) == 3
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 20 * 1024  # KiB
    assert nesting_depth('["\\"[", {"a": "]\\\\"}, [[]]]', 32) == 3
