"""Deployment files (docs/deploy.md): docker-compose.yml, Dockerfile, nginx, the entrypoint and healthcheck.

These tests need no Docker: the compose file is checked structurally (PyYAML) and, where the compose plugin
exists, by ``docker compose config``; nginx likewise by its directives and, where a recent enough nginx
exists, by ``nginx -t``. The image itself is built and run end to end by ``scripts/container_check.sh``
(root, dockerd; too slow for ``make test``: docs/deploy.md, "Container check").
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url
from starlette.applications import Starlette

from backend.config import Settings
from backend.server import server_config

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
NGINX_CONF = ROOT / "deploy" / "nginx" / "nginx.conf"
ENV_EXAMPLE = ROOT / "deploy" / "env.example"
MAKE_SECRETS = ROOT / "deploy" / "make-secrets.sh"
APP_SERVICES = ("app", "app-gpu1")
MODEL_CACHE = "/var/cache/captions"
REPLICA_ALIAS = "captions-replica"
PUBLIC_ORIGIN = "https://captions.example.org"
NGINX_WITH_UPSTREAM_RESOLVE = (1, 27, 3)
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$|DATABASE_URL")
INTERPOLATION = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


entrypoint = _load_module("captions_docker_entrypoint", ROOT / "deploy" / "docker-entrypoint.py")
healthcheck = _load_module("captions_healthcheck", ROOT / "deploy" / "healthcheck.py")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def _duration_s(value: str) -> float:
    """Compose durations: '90s', '1m30s', '20m', '1h'."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", value)
    assert parts and value, f"not a compose duration: {value!r}"
    hours, minutes, seconds = (float(p) if p else 0.0 for p in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def _interpolate(value: str, env: dict[str, str]) -> str:
    return INTERPOLATION.sub(lambda m: env[m.group(1)], value)


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends in a continuation"
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip()) for text in logical]


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in _dockerfile_instructions():
        if instruction == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", args)))
    return env


# --- docker-compose.yml -------------------------------------------------------------------------------------


def test_services_and_profiles(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", "migrate", "app", "app-gpu1", "proxy"}
    for always_on in ("db", "migrate", "app"):
        assert "profiles" not in services[always_on]
    assert services["app-gpu1"]["profiles"] == ["multi-gpu"]
    assert set(services["proxy"]["profiles"]) == {"proxy", "multi-gpu"}


def test_database_has_a_tcp_healthcheck_and_a_volume(compose: dict[str, Any]) -> None:
    db = compose["services"]["db"]
    assert db["image"].startswith("postgres:17")
    probe = " ".join(db["healthcheck"]["test"])
    assert "pg_isready" in probe and "-h 127.0.0.1" in probe
    assert "pgdata:/var/lib/postgresql/data" in db["volumes"]
    assert "pgdata" in compose["volumes"]
    assert db["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert "POSTGRES_PASSWORD" not in db["environment"]


def test_migrate_is_a_one_shot_captions_migrate(compose: dict[str, Any]) -> None:
    services = compose["services"]
    migrate = services["migrate"]
    assert migrate["command"] == ["captions", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert migrate["image"] == services["app"]["image"]
    assert "deploy" not in migrate, "migrations need no GPU"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_replica_waits_for_healthy_db_and_completed_migrations(compose: dict[str, Any], name: str) -> None:
    app = compose["services"][name]
    assert app["depends_on"] == {
        "db": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    assert app["restart"] == "unless-stopped"
    assert app["init"] is True
    assert app["networks"]["default"]["aliases"] == [REPLICA_ALIAS]
    assert app["environment"]["CAPTIONS_DEVICE"] == "cuda"


def test_each_replica_reserves_one_gpu_of_its_own(compose: dict[str, Any]) -> None:
    services = compose["services"]
    first = services["app"]["deploy"]["resources"]["reservations"]["devices"]
    assert first == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    owned: dict[str, str] = {}
    for name in APP_SERVICES:
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert ("count" in device) != ("device_ids" in device), "Docker rejects count with device_ids"
        # count: N takes GPUs 0..N-1.
        ids = device.get("device_ids") or [str(i) for i in range(device["count"])]
        assert len(ids) == 1, f"{name}: one replica per GPU"
        assert ids[0] not in owned, f"{name} and {owned.get(ids[0])} share GPU {ids[0]}"
        owned[ids[0]] = name


@pytest.mark.parametrize("name", APP_SERVICES)
def test_model_cache_volume_holds_the_download_caches(compose: dict[str, Any], name: str) -> None:
    assert f"model-cache:{MODEL_CACHE}" in compose["services"][name]["volumes"]
    assert "model-cache" in compose["volumes"]
    env = _dockerfile_env()
    for variable in ("HF_HOME", "NEMO_CACHE_DIR", "TORCH_HOME", "XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
        assert env[variable].startswith(MODEL_CACHE), variable


@pytest.mark.parametrize("name", APP_SERVICES)
def test_stop_grace_period_outlasts_drain_and_uvicorn_shutdown(compose: dict[str, Any], name: str) -> None:
    app = compose["services"][name]
    drain_s = float(app["environment"]["CAPTIONS_DRAIN_TIMEOUT_S"])
    uvicorn_s = server_config(Starlette(), Settings(drain_timeout_s=drain_s), "127.0.0.1", 8000)
    shutdown_s = drain_s + uvicorn_s.timeout_graceful_shutdown
    assert _duration_s(app["stop_grace_period"]) >= shutdown_s + 10, "Docker would SIGKILL mid-drain"


def test_no_secret_is_written_in_the_compose_file(compose: dict[str, Any]) -> None:
    text = COMPOSE_FILE.read_text()
    assert not re.search(r"://[^/\s:@]+:[^@\s]+@", text), "credentials in a URL"
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                assert key.endswith("_FILE"), f"{name}: {key} must come from a secret file"
                assert str(value).startswith("/run/secrets/"), f"{name}: {key}={value}"


def test_secrets_are_git_ignored_files_with_placeholder_examples(compose: dict[str, Any]) -> None:
    assert compose["secrets"], "no secrets declared"
    for name, secret in compose["secrets"].items():
        path = ROOT / secret["file"]
        assert path.parent == ROOT / "deploy" / "secrets", name
        example = path.with_name(path.name + ".example")
        assert "REPLACE" in example.read_text(), f"{example} is not a placeholder"
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(path)], check=False)
        assert ignored.returncode == 0, f"{path} is not git-ignored"
        tracked = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "--error-unmatch", str(path)],
            capture_output=True,
            check=False,
        )
        assert tracked.returncode != 0, f"{path} is committed"


def test_every_secret_file_variable_is_read_by_the_entrypoint(compose: dict[str, Any]) -> None:
    declared = set(compose["secrets"])
    for name, service in compose["services"].items():
        mounted = set(service.get("secrets") or [])
        assert mounted <= declared, name
        for key, value in (service.get("environment") or {}).items():
            if not key.endswith("_FILE"):
                continue
            assert Path(value).name in mounted, f"{name}: {key} points at an unmounted secret"
            if key.startswith("CAPTIONS_"):
                assert key.removesuffix("_FILE") in entrypoint.FILE_SETTINGS, key


def test_env_example_holds_no_secrets() -> None:
    for line in ENV_EXAMPLE.read_text().splitlines():
        key = line.lstrip("# ").split("=", 1)[0]
        if "=" in line and SECRET_NAME.search(key):
            pytest.fail(f"deploy/env.example sets {key}: secrets belong in deploy/secrets/")


def test_allowed_origins_becomes_a_json_list_of_the_public_origin(compose: dict[str, Any]) -> None:
    for name in ("migrate", *APP_SERVICES):
        raw = compose["services"][name]["environment"]["CAPTIONS_ALLOWED_ORIGINS"]
        assert json.loads(_interpolate(raw, {"CAPTIONS_PUBLIC_ORIGIN": PUBLIC_ORIGIN})) == [PUBLIC_ORIGIN]
        assert "CAPTIONS_PUBLIC_ORIGIN:?" in raw, "a missing origin must stop compose with a message"


def test_images_builds_and_mounted_files_exist(compose: dict[str, Any]) -> None:
    captions_images = set()
    for name, service in compose["services"].items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            context = ROOT / service["build"]["context"]
            assert (context / service["build"].get("dockerfile", "Dockerfile")).is_file(), name
            captions_images.add(service["image"])
        else:
            repository, _, tag = service["image"].partition(":")
            assert tag and tag != "latest", f"{name}: pin the image tag"
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source} is missing"
            else:
                assert source in compose["volumes"], f"{name}: undeclared volume {source}"
    assert len(captions_images) == 1, "every service built here must share one image"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_compose_healthcheck_is_the_images_readyz_probe(compose: dict[str, Any], name: str) -> None:
    check = compose["services"][name]["healthcheck"]
    assert check["test"] == ["CMD", "python", "/usr/local/lib/captions/healthcheck.py"]
    assert _duration_s(check["start_period"]) >= 600, "the first start may download the model"


def _docker_compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return probe.returncode == 0


def _docker_compose_config(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    empty_env_file = tmp_path / "empty.env"
    empty_env_file.write_text("")
    command = ["docker", "compose", "-f", str(COMPOSE_FILE), "--env-file", str(empty_env_file)]
    command += ["--profile", "proxy", "--profile", "multi-gpu", "config", "-q"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CAPTIONS_", "COMPOSE_"))}
    return subprocess.run(
        command, cwd=ROOT, env=clean | env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.skipif(not _docker_compose_available(), reason="no docker client with the compose plugin here")
def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    result = _docker_compose_config(tmp_path, {"CAPTIONS_PUBLIC_ORIGIN": PUBLIC_ORIGIN})
    assert result.returncode == 0, result.stderr
    missing = _docker_compose_config(tmp_path, {})
    assert missing.returncode != 0 and "CAPTIONS_PUBLIC_ORIGIN" in missing.stderr


# --- Dockerfile ---------------------------------------------------------------------------------------------


def _dockerignored() -> list[str]:
    lines = DOCKERIGNORE.read_text().splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def test_dockerfile_copy_sources_exist_and_are_in_the_build_context() -> None:
    ignored = _dockerignored()
    copies = [args for instruction, args in _dockerfile_instructions() if instruction == "COPY"]
    assert copies
    for args in copies:
        words = args.split()
        if any(word.startswith("--from") for word in words):
            continue
        for source in [word for word in words[:-1] if not word.startswith("--")]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            top = source.rstrip("/")
            assert not any(top == pattern or top.startswith(pattern + "/") for pattern in ignored), (
                f"COPY {source}: excluded by .dockerignore"
            )


def test_dockerfile_copies_the_app_migrations_frontend_and_model() -> None:
    copied = " ".join(args for instruction, args in _dockerfile_instructions() if instruction == "COPY")
    for needed in ("backend/", "biasing/", "migrations/", "frontend/", "models/", "pyproject.toml"):
        assert needed in copied, needed
    # backend/config.py finds migrations/ and models/ next to backend/: an editable install from /app.
    runs = " ".join(args for instruction, args in _dockerfile_instructions() if instruction == "RUN")
    assert "pip install --no-deps --no-build-isolation --no-cache-dir -e ." in runs


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for instruction, args in _dockerfile_instructions() if instruction == "USER"]
    assert users, "no USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}


def test_dockerfile_healthcheck_probes_readyz() -> None:
    (check,) = [args for instruction, args in _dockerfile_instructions() if instruction == "HEALTHCHECK"]
    assert "/usr/local/lib/captions/healthcheck.py" in check
    assert healthcheck.readyz_url().endswith("/readyz")


def test_dockerfile_serves_through_the_entrypoint() -> None:
    instructions = dict(_dockerfile_instructions())
    assert json.loads(instructions["ENTRYPOINT"]) == [
        "python",
        "/usr/local/lib/captions/docker-entrypoint.py",
    ]
    assert json.loads(instructions["CMD"]) == ["captions", "serve"]
    env = _dockerfile_env()
    assert env["CAPTIONS_HOST"] == "0.0.0.0", "inside a container the server must listen on all interfaces"


def test_dockerfile_torch_and_python_match_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    args = dict(a.split("=", 1) for i, a in _dockerfile_instructions() if i == "ARG" and "=" in a)
    assert f"torch=={args['TORCH_VERSION']}" in project["dependencies"]
    assert args["PYTHON_IMAGE"].startswith("python:3.11"), "pyproject and the venv use Python 3.11"


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    ignored = set(_dockerignored())
    assert {".git", ".venv", ".env", "deploy/secrets", "deploy/tls", "data", "var", "tests"} <= ignored


# --- nginx --------------------------------------------------------------------------------------------------


def _nginx_directives() -> list[str]:
    text = re.sub(r"#[^\n]*", "", NGINX_CONF.read_text())
    return [" ".join(d.split()) for d in re.split(r"[;{}]", text) if d.strip()]


def _upstreams() -> dict[str, str]:
    text = re.sub(r"#[^\n]*", "", NGINX_CONF.read_text())
    return dict(re.findall(r"upstream\s+(\w+)\s*\{([^}]*)\}", text))


def test_nginx_passes_the_websocket_upgrade() -> None:
    directives = _nginx_directives()
    for needed in (
        "map $http_upgrade $connection_upgrade",
        "proxy_http_version 1.1",
        "proxy_set_header Upgrade $http_upgrade",
        "proxy_set_header Connection $connection_upgrade",
        "proxy_set_header X-Forwarded-Proto $scheme",
        # Overwritten, not appended: uvicorn trusts the left-most address.
        "proxy_set_header X-Forwarded-For $remote_addr",
    ):
        assert needed in directives, needed


def test_nginx_timeouts_allow_hour_long_sessions() -> None:
    directives = _nginx_directives()
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        (value,) = [d.split()[1] for d in directives if d.startswith(name + " ")]
        assert _duration_s(value) >= 3600, name


def test_nginx_balances_least_conn_with_cookie_affinity_as_an_optimisation() -> None:
    upstreams = _upstreams()
    assert "least_conn" in upstreams["captions_least_conn"]
    assert "hash $cookie_captions_affinity consistent" in " ".join(upstreams["captions_affinity"].split())
    directives = _nginx_directives()
    # Without the cookie: least connections; a full or draining replica's 503 goes to the next one.
    assert any(d.startswith("map $cookie_captions_affinity $captions_upstream") for d in directives)
    assert '"" captions_least_conn' in directives
    assert "proxy_pass http://$captions_upstream" in directives
    (retry,) = [d for d in directives if d.startswith("proxy_next_upstream ")]
    assert "http_503" in retry.split()


def test_nginx_upstreams_are_every_app_replica(compose: dict[str, Any]) -> None:
    for name, body in _upstreams().items():
        servers = re.findall(r"server\s+([^\s;]+)\s+([^;]*);", body)
        assert servers == [(f"{REPLICA_ALIAS}:8000", servers[0][1])], name
        assert "resolve" in servers[0][1].split(), f"{name}: replicas come and go; re-resolve them"
        assert re.search(r"zone\s+\w+", body), f"{name}: resolve needs a shared-memory zone"
    assert "resolver 127.0.0.11 valid=10s ipv6=off" in _nginx_directives()
    for name in APP_SERVICES:
        assert REPLICA_ALIAS in compose["services"][name]["networks"]["default"]["aliases"]


def test_nginx_terminates_tls_with_the_mounted_certificates(compose: dict[str, Any]) -> None:
    directives = _nginx_directives()
    assert "listen 443 ssl default_server" in directives
    assert "ssl_certificate /etc/nginx/tls/fullchain.pem" in directives
    assert "ssl_certificate_key /etc/nginx/tls/privkey.pem" in directives
    assert "return 404" in directives, "/metrics must not be public"
    mounts = compose["services"]["proxy"]["volumes"]
    assert "./deploy/tls:/etc/nginx/tls:ro" in mounts
    assert "./deploy/nginx/nginx.conf:/etc/nginx/nginx.conf:ro" in mounts


def _nginx_locations() -> dict[str, list[str]]:
    """Each ``location`` of the TLS server: its directives."""
    text = re.sub(r"#[^\n]*", "", NGINX_CONF.read_text())
    found = re.findall(r"location\s+([^{]+?)\s*\{([^}]*)\}", text)
    return {where: [" ".join(d.split()) for d in body.split(";") if d.strip()] for where, body in found}


def _nginx_bytes(value: str) -> int:
    units = {"k": 1024, "m": 1024 * 1024}
    return int(value[:-1]) * units[value[-1]] if value[-1] in units else int(value)


def test_nginx_body_caps_match_the_apps(tmp_path: Path) -> None:
    """nginx refuses what the app would refuse, never less (the app's 413 is typed JSON)."""
    from backend.edge.http_limits import MAX_DRAFT_BODY_BYTES

    settings = Settings(data_dir=tmp_path)
    directives = _nginx_directives()
    (server_wide,) = [d for d in directives if d.startswith("client_max_body_size ") and d.endswith("64k")]
    assert _nginx_bytes(server_wide.split()[1]) == settings.max_body_bytes
    anonymous = "~ ^/api/(auth/login|invites/check|invites/accept|viewer-links/open)$"
    expected = {
        anonymous: settings.max_anonymous_body_bytes,
        "~ ^/api/vocabularies/[0-9]+/(terms|import)$": settings.max_upload_body_bytes,
        "~ ^/api/drafts/[0-9]+$": MAX_DRAFT_BODY_BYTES,
    }
    locations = _nginx_locations()
    for where, app_bytes in expected.items():
        (cap,) = [d.split()[1] for d in locations[where] if d.startswith("client_max_body_size ")]
        assert app_bytes <= _nginx_bytes(cap) < app_bytes + 2048, where
        assert "proxy_pass http://$captions_upstream" in locations[where], where


def test_nginx_rate_limits_the_no_login_routes_as_the_app_does(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    rate = f"rate={settings.anonymous_requests_per_minute}r/m"
    assert f"limit_req_zone $binary_remote_addr zone=anonymous_per_address:10m {rate}" in _nginx_directives()
    anonymous = _nginx_locations()["~ ^/api/(auth/login|invites/check|invites/accept|viewer-links/open)$"]
    assert "limit_req zone=anonymous_per_address burst=10 nodelay" in anonymous
    assert "limit_req_status 429" in anonymous


def test_nginx_caps_meeting_views_per_address_as_the_app_does(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert "limit_conn_zone $binary_remote_addr zone=viewers_per_address:10m" in _nginx_directives()
    view = _nginx_locations()["= /ws/view"]
    assert f"limit_conn viewers_per_address {settings.max_viewers_per_client}" in view
    assert "proxy_pass http://$captions_upstream" in view


def _nginx_version(binary: str) -> tuple[int, ...]:
    result = subprocess.run([binary, "-v"], capture_output=True, text=True, check=False)
    match = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", result.stderr + result.stdout)
    return tuple(int(part) for part in match.groups()) if match else (0,)


def _nginx_skip_reason() -> str | None:
    binary = shutil.which("nginx")
    if binary is None:
        return "nginx is not installed here (its directives are checked textually above)"
    if _nginx_version(binary) < NGINX_WITH_UPSTREAM_RESOLVE:
        return "this nginx predates 1.27.3 and cannot parse `server ... resolve` (the image uses 1.28)"
    if shutil.which("openssl") is None:
        return "openssl is needed for a throw-away certificate"
    return None


@pytest.mark.skipif(_nginx_skip_reason() is not None, reason=_nginx_skip_reason() or "")
def test_nginx_accepts_the_config(tmp_path: Path) -> None:
    tls = tmp_path / "tls"
    tls.mkdir()
    (tmp_path / "tmp").mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-keyout", str(tls / "privkey.pem"), "-out", str(tls / "fullchain.pem")],
        capture_output=True,
        check=True,
    )
    temp_paths = " ".join(f"{kind}_temp_path tmp/{kind};" for kind in ("client_body", "proxy", "fastcgi"))
    temp_paths += " uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;"
    config = (
        NGINX_CONF.read_text()
        .replace("/etc/nginx/tls/", f"{tls}/")
        .replace(f"{REPLICA_ALIAS}:8000", "localhost:8000")
        .replace("http {", "http {\n    " + temp_paths, 1)
        .replace("worker_processes auto;", "worker_processes auto;\npid nginx.pid;", 1)
    )
    (tmp_path / "nginx.conf").write_text(config)
    result = subprocess.run(
        ["nginx", "-t", "-e", "stderr", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# --- deploy/docker-entrypoint.py ----------------------------------------------------------------------------


def _secret(tmp_path: Path, name: str, value: str) -> str:
    path = tmp_path / name
    path.write_text(value)
    return str(path)


def test_entrypoint_builds_the_database_url_from_the_postgres_secret(tmp_path: Path) -> None:
    password = "p@ss:w/rd%?#"
    env = {
        "POSTGRES_HOST": "db",
        "POSTGRES_PORT": "5432",
        "POSTGRES_USER": "captions",
        "POSTGRES_DB": "captions",
        "POSTGRES_PASSWORD_FILE": _secret(tmp_path, "postgres_password", password + "\n"),
    }
    entrypoint.prepare_environment(env)
    url = make_url(env["CAPTIONS_DATABASE_URL"])
    assert url.drivername == "postgresql+asyncpg"
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "captions",
        password,
        "db",
        5432,
        "captions",
    )


def test_entrypoint_turns_secret_files_into_settings(tmp_path: Path) -> None:
    env = {
        "CAPTIONS_SECRET_KEY_FILE": _secret(tmp_path, "key", "k" * 64 + "\n"),
        "CAPTIONS_ADMIN_PASSWORD_FILE": _secret(tmp_path, "admin", "hunter2\n"),
        "CAPTIONS_DATABASE_URL": "sqlite+aiosqlite:////tmp/x.db",
        "POSTGRES_PASSWORD_FILE": _secret(tmp_path, "pg", "unused"),
    }
    entrypoint.prepare_environment(env)
    assert env == {
        "CAPTIONS_SECRET_KEY": "k" * 64,
        "CAPTIONS_ADMIN_PASSWORD": "hunter2",
        "CAPTIONS_DATABASE_URL": "sqlite+aiosqlite:////tmp/x.db",
        "POSTGRES_PASSWORD_FILE": env["POSTGRES_PASSWORD_FILE"],
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CAPTIONS_SECRET_KEY": "a", "CAPTIONS_SECRET_KEY_FILE": "KEYFILE"}, "both CAPTIONS_SECRET_KEY"),
        ({"CAPTIONS_SECRET_KEY_FILE": "/nonexistent/secret"}, "cannot read"),
        ({"CAPTIONS_SECRET_KEY_FILE": "EMPTY"}, "is empty"),
        ({"POSTGRES_PASSWORD_FILE": "EMPTY"}, "is empty"),
    ],
)
def test_entrypoint_rejects_a_bad_secret_with_the_variable_named(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    files = {"KEYFILE": _secret(tmp_path, "key", "k"), "EMPTY": _secret(tmp_path, "empty", "\n")}
    env = {key: files.get(value, value) for key, value in env.items()}
    with pytest.raises(entrypoint.EntrypointError, match=message):
        entrypoint.prepare_environment(env)


def test_entrypoint_execs_the_command_or_exits_64(tmp_path: Path) -> None:
    base = {"PATH": os.environ["PATH"], "CAPTIONS_SECRET_KEY_FILE": _secret(tmp_path, "key", "s3cret\n")}
    script = str(ROOT / "deploy" / "docker-entrypoint.py")
    probe = "import os; print(os.environ['CAPTIONS_SECRET_KEY'], 'CAPTIONS_SECRET_KEY_FILE' in os.environ)"
    ok = subprocess.run(
        [sys.executable, script, sys.executable, "-c", probe],
        env=base,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ok.returncode, ok.stdout) == (0, "s3cret False\n"), ok.stderr
    broken = base | {"CAPTIONS_SECRET_KEY_FILE": str(tmp_path / "missing")}
    bad = subprocess.run(
        [sys.executable, script, "true"], env=broken, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 64 and "CAPTIONS_SECRET_KEY_FILE" in bad.stderr


# --- deploy/healthcheck.py ----------------------------------------------------------------------------------


class _Readyz(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        code = self.status if self.path == "/readyz" else 404
        body = json.dumps({"ready": code == 200}).encode()
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the http.server API)
        pass


@pytest.fixture
def readyz_server() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Readyz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()
    _Readyz.status = 200


def test_healthcheck_passes_on_200_and_fails_on_503(readyz_server: http.server.ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{readyz_server.server_address[1]}/readyz"
    assert healthcheck.check(url) == 0
    _Readyz.status = 503
    assert healthcheck.check(url) == 1


def test_healthcheck_fails_when_nothing_listens(readyz_server: http.server.ThreadingHTTPServer) -> None:
    port = readyz_server.server_address[1]
    readyz_server.shutdown()
    readyz_server.server_close()
    assert healthcheck.check(f"http://127.0.0.1:{port}/readyz", timeout_s=2) == 1


def test_healthcheck_script_uses_captions_port_and_ignores_proxies(
    readyz_server: http.server.ThreadingHTTPServer,
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "CAPTIONS_PORT": str(readyz_server.server_address[1]),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    script = str(ROOT / "deploy" / "healthcheck.py")
    result = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


# --- deploy/make-secrets.sh ---------------------------------------------------------------------------------


def test_make_secrets_writes_readable_random_secrets_once(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copy(MAKE_SECRETS, deploy / "make-secrets.sh")
    run = ["sh", str(deploy / "make-secrets.sh")]
    subprocess.run(run, capture_output=True, check=True)
    secrets = deploy / "secrets"
    written = {path.name: path.read_text() for path in secrets.iterdir()}
    compose_secrets = yaml.safe_load(COMPOSE_FILE.read_text())["secrets"]
    assert set(written) == {Path(s["file"]).name for s in compose_secrets.values()}
    for name, value in written.items():
        assert re.fullmatch(r"[0-9a-f]{24,}", value), name
        assert stat.S_IMODE((secrets / name).stat().st_mode) == 0o444, name
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    subprocess.run(run, capture_output=True, check=True)
    assert {path.name: path.read_text() for path in secrets.iterdir()} == written, "secrets were replaced"


# --- the compose `migrate` step against a real PostgreSQL ---------------------------------------------------


def _postgres_bin() -> Path | None:
    """The folder of initdb, pg_ctl, pg_dump, ... (Debian keeps them out of PATH)."""
    initdb = shutil.which("initdb")
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if initdb:
        found.append(Path(initdb).resolve())
    return found[-1].parent if found else None


def _as_postgres() -> list[str]:
    """initdb and postgres refuse to run as root: drop to the ``postgres`` user when we are root."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@pytest.fixture
def postgres_server() -> Iterator[tuple[int, str]]:
    """A throwaway PostgreSQL on 127.0.0.1 with password authentication: (port, password of ``captions``)."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries are not installed (make system-deps)")
    password = "p@ss:w/rd%?#"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(tempfile.mkdtemp(prefix="captions-pg-"))
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(pwfile, "postgres")
    data = root / "data"
    server = [*_as_postgres(), str(bin_dir / "pg_ctl"), "-D", str(data)]
    try:
        subprocess.run(
            [
                *_as_postgres(),
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "captions",
                "--pwfile",
                str(pwfile),
            ]
            + ["--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"],
            capture_output=True,
            check=True,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            [*server, "-w", "-t", "60", "-l", str(root / "log"), "-o", options, "start"],
            capture_output=True,
            check=True,
        )
        yield port, password
    finally:
        subprocess.run([*server, "-m", "fast", "stop"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.postgres
@pytest.mark.slow
def test_migrate_service_command_on_postgres_then_backup_and_restore(
    postgres_server: tuple[int, str], tmp_path: Path
) -> None:
    """What compose runs: pg_isready over TCP, then `captions migrate` through the entrypoint with the
    database URL built from the password secret; then the backup and restore commands of docs/deploy.md."""
    port, password = postgres_server
    bin_dir = _postgres_bin()
    assert bin_dir is not None
    client_env = {"PATH": os.environ["PATH"], "PGPASSWORD": password}
    at = ["-h", "127.0.0.1", "-p", str(port), "-U", "captions"]
    subprocess.run([str(bin_dir / "pg_isready"), *at, "-d", "postgres"], check=True, capture_output=True)
    subprocess.run(
        [str(bin_dir / "createdb"), *at, "captions"], env=client_env, check=True, capture_output=True
    )

    captions = Path(sys.executable).with_name("captions")
    command = (
        [str(captions), "migrate"] if captions.exists() else [sys.executable, "-m", "backend.cli", "migrate"]
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "POSTGRES_HOST": "127.0.0.1",
        "POSTGRES_PORT": str(port),
        "POSTGRES_USER": "captions",
        "POSTGRES_DB": "captions",
        "POSTGRES_PASSWORD_FILE": _secret(tmp_path, "postgres_password", password + "\n"),
    }
    migrate = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "docker-entrypoint.py"), *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr
    assert password not in migrate.stdout + migrate.stderr, "the password was printed"

    psql = [str(bin_dir / "psql"), *at, "-d", "captions", "-tAc"]
    query = "select version_num from alembic_version"
    head = subprocess.run([*psql, query], env=client_env, capture_output=True, text=True, check=True)
    assert head.stdout.strip(), "no Alembic revision recorded"

    dump = tmp_path / "captions.dump"
    subprocess.run(
        [str(bin_dir / "pg_dump"), *at, "-d", "captions", "-Fc", "-f", str(dump)], env=client_env, check=True
    )
    subprocess.run(
        [str(bin_dir / "pg_restore"), *at, "-d", "captions", "--clean", "--if-exists", str(dump)],
        env=client_env,
        capture_output=True,
        check=True,
    )
    restored = subprocess.run([*psql, query], env=client_env, capture_output=True, text=True, check=True)
    assert restored.stdout == head.stdout


# --- what the image holds: the service's packages, not the tools ------------------------------------------

IMAGE_PACKAGES = ("backend", "biasing", "captions_model", "migrations")
TOOL_PACKAGES = ("eval", "loadtest", "training", "bench", "tests")


def _first_party_imports(folder: Path) -> dict[str, set[str]]:
    """Top-level first-party names imported anywhere under ``folder`` (function-level imports included)."""
    import ast

    first_party = set(IMAGE_PACKAGES) | set(TOOL_PACKAGES)
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".", 1)[0]
                if top in first_party:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_image_holds_every_package_the_service_imports_and_no_tool() -> None:
    """The bug of issue 27: backend/cli.py imported eval/ while .dockerignore left it out of the image."""
    copied = " ".join(args for instruction, args in _dockerfile_instructions() if instruction == "COPY")
    ignored = set(_dockerignored())
    for package in IMAGE_PACKAGES:
        assert f"{package}/" in copied, f"the Dockerfile does not COPY {package}/"
        assert package not in ignored
        imported = _first_party_imports(ROOT / package)
        for tool in TOOL_PACKAGES:
            assert tool not in imported, f"{sorted(imported[tool])} import {tool}, which the image leaves out"
    for tool in ("eval", "loadtest", "training"):
        assert tool in ignored, f".dockerignore: {tool}/ is a tool, not the service"


def test_a_local_torch_wheel_replaces_the_index_one_only_when_present() -> None:
    runs = [args for instruction, args in _dockerfile_instructions() if instruction == "RUN"]
    (torch,) = [run for run in runs if "/tmp/wheels/torch-" in run]
    assert torch.index("/tmp/wheels/torch-") < torch.index("--index-url")
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", "deploy/wheels/torch-2.13.0+cpu-x.whl"], check=False
    )
    assert tracked.returncode == 0, "wheels in deploy/wheels/ must be git-ignored"
    assert (ROOT / "deploy" / "wheels" / "README.md").is_file(), "COPY deploy/wheels/ needs the folder"


def test_the_base_image_is_a_build_argument_defaulting_to_the_official_python() -> None:
    instructions = _dockerfile_instructions()
    assert instructions[0] == ("ARG", "PYTHON_IMAGE=python:3.11-slim-bookworm")
    froms = [args for instruction, args in instructions if instruction == "FROM"]
    assert froms and all(args.startswith("${PYTHON_IMAGE}") for args in froms)


# --- scripts/container_check.sh and what it builds ---------------------------------------------------------

container_compose = _load_module("captions_container_compose", ROOT / "scripts" / "container_compose.py")


@pytest.mark.parametrize(
    "script",
    ["scripts/container_check.sh", "scripts/base_image.sh", "deploy/postgres/entrypoint.sh"],
)
def test_container_scripts_are_executable_shell_that_parses(script: str) -> None:
    path = ROOT / script
    assert path.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    shell = "bash" if path.read_text().startswith("#!/bin/bash") else "sh"
    subprocess.run([shell, "-n", str(path)], check=True)


def test_check_compose_file_is_the_real_one_on_a_cpu(compose: dict[str, Any], tmp_path: Path) -> None:
    """The check changes only what a CPU-only machine without a registry needs; the rest stays as it is."""
    config = container_compose.check_compose(
        compose, tmp_path, 18000, "captions:local", "captions-postgres:local", 15
    )
    services = config["services"]
    assert set(services) == {"db", "migrate", "app"}
    assert services["db"]["image"] == "captions-postgres:local"
    assert services["db"]["healthcheck"] == compose["services"]["db"]["healthcheck"]
    app, real = services["app"], compose["services"]["app"]
    assert "deploy" not in app and "build" not in app and "env_file" not in app
    assert app["environment"]["CAPTIONS_DEVICE"] == "cpu"
    assert json.loads(app["environment"]["CAPTIONS_ALLOWED_ORIGINS"]) == ["http://127.0.0.1:18000"]
    for key in ("depends_on", "healthcheck", "secrets", "stop_grace_period", "init", "volumes"):
        assert app[key] == real[key], key
    assert services["migrate"]["command"] == ["captions", "migrate"]
    assert services["migrate"]["depends_on"] == compose["services"]["migrate"]["depends_on"]
    assert set(config["secrets"]) == set(compose["secrets"])
    assert all(Path(s["file"]).parent == tmp_path for s in config["secrets"].values())
    drain_s = float(app["environment"]["CAPTIONS_DRAIN_TIMEOUT_S"])
    uvicorn = server_config(Starlette(), Settings(drain_timeout_s=drain_s), "127.0.0.1", 8000)
    shutdown_s = drain_s + uvicorn.timeout_graceful_shutdown
    assert _duration_s(app["stop_grace_period"]) >= shutdown_s + 10, "Docker would SIGKILL mid-drain"
    assert app["ulimits"] == real["ulimits"], "no cap asked for"
    capped = container_compose.check_compose(compose, tmp_path, 18000, "a", "b", 15, nofile=20000)
    assert capped["services"]["app"]["ulimits"]["nofile"] == {"soft": 20000, "hard": 20000}
    assert real["ulimits"]["nofile"]["hard"] == 65536, "the real file is unchanged"


def test_postgres_image_keeps_the_official_images_contract(compose: dict[str, Any]) -> None:
    """deploy/postgres/ stands in for postgres:17: the same variables, data folder and probe."""
    text = (ROOT / "deploy" / "postgres" / "entrypoint.sh").read_text()
    for variable in compose["services"]["db"]["environment"]:
        assert f"${{{variable}" in text or f"${variable}" in text, variable
    dockerfile = (ROOT / "deploy" / "postgres" / "Dockerfile").read_text()
    data = compose["services"]["db"]["volumes"][0].split(":", 1)[1]
    assert f"PGDATA={data}" in dockerfile
    assert "USER postgres" in dockerfile and "EXPOSE 5432" in dockerfile
