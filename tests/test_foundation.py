"""The foundation: settings validation, the CLI, migrations on SQLite, health and pages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.testclient import TestClient

from backend.app import create_app
from backend.cli import build_parser
from backend.config import Settings
from backend.db.migrate import downgrade, upgrade
from backend.db.models import Base
from tests.support.fake_engine import FakeEngine
from tests.support.server import ADMIN_PASSWORD


def test_settings_read_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTIONS_PORT", "9123")
    monkeypatch.setenv("CAPTIONS_ALLOWED_CHUNK_S", "[0.56]")
    settings = Settings()
    assert settings.port == 9123
    assert settings.allowed_chunk_s == [0.56]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CAPTIONS_PORT", "0"),
        ("CAPTIONS_ALLOWED_CHUNK_S", "[0.5]"),
        ("CAPTIONS_LOG_LEVEL", "loud"),
        ("CAPTIONS_FINAL_PASS_ARBITRATION", "vote"),
    ],
)
def test_invalid_settings_are_rejected_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        Settings()
    assert name.removeprefix("CAPTIONS_").lower() in str(info.value)


def test_cli_has_serve_and_migrate() -> None:
    parser = build_parser()
    assert parser.parse_args(["migrate"]).revision == "head"
    assert parser.parse_args(["serve", "--port", "9000"]).port == 9000
    with pytest.raises(SystemExit):
        parser.parse_args(["frobnicate"])


def _sync_url(url: str) -> str:
    return url.replace("+aiosqlite", "").replace("+asyncpg", "+psycopg2")


def _tables(url: str) -> set[str]:
    async def names() -> set[str]:
        engine = create_async_engine(url)
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
        await engine.dispose()
        return tables

    return asyncio.run(names())


def test_migrations_upgrade_and_downgrade(database_url: str) -> None:
    url = database_url
    upgrade("head", url)
    assert set(Base.metadata.tables) <= _tables(url)
    downgrade("base", url)
    assert _tables(url) == {"alembic_version"}


def test_migration_0002_numbers_on_after_the_captions_already_stored(database_url: str) -> None:
    """Upgrading a live deployment: each session's ``last_seq`` starts at its highest stored caption number,
    so a session resumed after the upgrade does not collide with its own earlier captions."""
    upgrade("0001", database_url)
    statements = [
        "INSERT INTO meetings (id, kind, title, chunk_ms, decoding, status, created_at) "
        "VALUES (1, 'MEETING', 'm', 1120, 'greedy', 'LIVE', CURRENT_TIMESTAMP)",
        *(
            "INSERT INTO stream_sessions (id, meeting_id, resume_token_hash, resume_expires_at, "
            "audio_offset_s, created_at) "
            f"VALUES ('{sid}', 1, 'h{sid}', CURRENT_TIMESTAMP, 0, CURRENT_TIMESTAMP)"
            for sid in ("a", "b")
        ),
        *(
            "INSERT INTO caption_segments (meeting_id, session_id, seq, text, start_s, end_s, words, "
            "matched_terms, created_at) "
            f"VALUES (1, 'a', {seq}, 'x', 0, 1, '[]', '[]', CURRENT_TIMESTAMP)"
            for seq in (1, 2, 3)
        ),
    ]
    _execute(database_url, statements)
    upgrade("head", database_url)
    rows = _execute(database_url, ["SELECT id, last_seq FROM stream_sessions ORDER BY id"])
    assert rows == [("a", 3), ("b", 0)]


def test_migration_0008_clamps_stored_weights_to_the_boost_levels(database_url: str) -> None:
    """Lists stored with the old weights (0.1-10) still load after the upgrade: out-of-range weights are
    clamped to 0.5-2 and their vocabulary's version moves on (live meetings recompile it)."""
    upgrade("0007", database_url)
    statements = [
        "INSERT INTO vocabularies (id, name, description, version, created_at, updated_at) VALUES "
        "(1, 'old', '', 3, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP), "
        "(2, 'fine', '', 5, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
        *(
            "INSERT INTO terms (vocabulary_id, text, normalized, weight, alternates, created_at, updated_at) "
            f"VALUES ({vocab}, '{text}', '{text}', {weight}, '[]', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            for vocab, text, weight in (
                (1, "halvorsen", 10),
                (1, "quiet", 0.1),
                (1, "kept", 1.5),
                (2, "x", 2),
            )  # fmt: skip
        ),
    ]
    _execute(database_url, statements)
    upgrade("head", database_url)
    rows = _execute(database_url, ["SELECT text, weight FROM terms ORDER BY text"])
    assert rows == [("halvorsen", 2.0), ("kept", 1.5), ("quiet", 0.5), ("x", 2.0)]
    versions = _execute(database_url, ["SELECT id, version FROM vocabularies ORDER BY id"])
    assert versions == [(1, 4), (2, 5)]


def test_migration_0010_makes_owners_and_speakers_members(database_url: str) -> None:
    """Upgrading keeps what people could read: each meeting's owner and everyone who spoke in it become its
    members (a speaker with two sessions once), and every meeting starts private."""
    upgrade("0009", database_url)
    statements = [
        "INSERT INTO users (id, username, password_hash, role, created_at, session_epoch) VALUES "
        + ", ".join(f"({i}, 'u{i}', 'x', 'MEMBER', CURRENT_TIMESTAMP, 0)" for i in (1, 2, 3, 4)),
        "INSERT INTO meetings (id, kind, title, owner_id, chunk_ms, decoding, status, created_at) VALUES "
        "(1, 'MEETING', 'm', 1, 1120, 'greedy', 'ENDED', CURRENT_TIMESTAMP), "
        "(2, 'MEETING', 'n', NULL, 1120, 'greedy', 'ENDED', CURRENT_TIMESTAMP)",
        *(
            "INSERT INTO stream_sessions (id, meeting_id, user_id, resume_token_hash, resume_expires_at, "
            f"audio_offset_s, created_at) VALUES ('{sid}', {m}, {u}, 'h{sid}', CURRENT_TIMESTAMP, 0, "
            "CURRENT_TIMESTAMP)"
            for sid, m, u in (("a", 1, 1), ("b", 1, 2), ("c", 1, 2), ("d", 2, 3))
        ),
    ]
    _execute(database_url, statements)
    upgrade("head", database_url)
    rows = _execute(database_url, ["SELECT meeting_id, user_id FROM meeting_members ORDER BY 1, 2"])
    assert rows == [(1, 1), (1, 2), (2, 3)]
    assert _execute(database_url, ["SELECT DISTINCT visibility FROM meetings"]) == [("private",)]


def test_sqlite_uses_the_write_ahead_log_and_foreign_keys(tmp_path: Path) -> None:
    from backend.db.session import Database

    async def pragmas() -> tuple[str, int]:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")
        async with db.engine.connect() as connection:
            mode = (await connection.execute(sa.text("PRAGMA journal_mode"))).scalar_one()
            keys = (await connection.execute(sa.text("PRAGMA foreign_keys"))).scalar_one()
        await db.dispose()
        return mode, keys

    assert asyncio.run(pragmas()) == ("wal", 1)


def test_models_match_the_migrations(tmp_path: Path) -> None:
    """Autogenerate finds nothing to add: the ORM models and the migration history agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    upgrade("head", url)
    engine = sa.create_engine(url.replace("+aiosqlite", ""))
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []


def test_healthz_readyz_and_placeholder_page(client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"]["database"] is True
    page = client.get("/")
    assert page.status_code == 200
    assert "<title>" in page.text.lower() or "<html" in page.text.lower()


class BrokenEngine(FakeEngine):
    async def start(self) -> None:
        raise RuntimeError("model file is corrupt")


def test_a_model_that_fails_to_load_keeps_liveness_but_not_readiness(settings: Settings) -> None:
    with TestClient(create_app(settings, engine=BrokenEngine())) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["engine"] is False
        login = client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        client.headers["x-csrf-token"] = login.json()["csrf_token"]
        vocab = client.post("/api/vocabularies", json={"name": "v"}).json()["vocabulary"]
        refused = client.post(f"/api/vocabularies/{vocab['id']}/terms", json={"terms": ["linezolid"]})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "engine_unavailable"


def _execute(url: str, statements: list[str]) -> list[tuple]:
    """Run ``statements`` in one transaction; the rows of the last one."""

    async def run() -> list[tuple]:
        engine = create_async_engine(url)
        async with engine.begin() as connection:
            for sql in statements:
                result = await connection.execute(sa.text(sql))
            rows = [tuple(r) for r in result] if result.returns_rows else []
        await engine.dispose()
        return rows

    return asyncio.run(run())


def test_the_bundled_lm_goes_with_the_bundled_model_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend import config
    from captions_model import paths

    bundled_lm = tmp_path / "lm.nemo"
    bundled_lm.write_bytes(b"lm")
    monkeypatch.setattr(paths, "BUNDLED_LM_PATH", bundled_lm)
    assert config.lm_path(Settings()) == str(bundled_lm)
    assert config.lm_path(Settings(model=str(tmp_path / "other.nemo"))) is None  # its vocabulary differs
    assert config.lm_path(Settings(lm="none")) is None
    assert config.lm_path(Settings(model="nvidia/parakeet", lm="/lms/p.arpa")) == "/lms/p.arpa"
    bundled_lm.unlink()
    assert config.lm_path(Settings()) is None


def test_engine_config_is_what_the_settings_say() -> None:
    from backend.config import engine_config

    settings = Settings(
        beam_size=4,
        biasing_alpha=2.0,
        engine_left_context_s=1.12,
        biasing_graph_mode="char",
        lm="none",
        final_pass_arbitration="agreement",
        final_pass_refine_partials_s=0,
    )
    config = engine_config(settings)
    assert (config.beam_size, config.biasing_alpha, config.left_context_s) == (4, 2.0, 1.12)
    assert config.final_pass_arbitration == "agreement" and config.final_pass_refine_partials_s == 0
    assert config.biasing_graph_mode == "char" and config.lm_path is None
    assert config.vocabulary_cache_dir == str(settings.cache_dir)
    assert engine_config(settings, beam_size=2).beam_size == 2
    with pytest.raises(TypeError, match="beams"):
        engine_config(settings, beams=2)


def test_logged_exceptions_carry_their_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import structlog

    from backend.edge.logs import configure_logging, get_logger

    saved = structlog.get_config()
    configure_logging("info")  # writes to this test's captured stderr: restored below
    try:
        raise FileNotFoundError("models/missing.nemo")
    except FileNotFoundError:
        get_logger("test").exception("engine_start_failed")
    finally:
        structlog.configure(**saved)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "engine_start_failed"
    (exception,) = line["exception"]
    assert exception["exc_type"] == "FileNotFoundError" and "missing.nemo" in exception["exc_value"]
    assert exception["frames"]
