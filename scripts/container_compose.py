"""Writes the compose file of scripts/container_check.sh: docker-compose.yml for a CPU-only machine.

The services, secrets, healthchecks, dependencies, stop grace period and entrypoint stay those of
docker-compose.yml; only what this machine lacks or needs differently changes:

- ``db`` runs the PostgreSQL image built from Debian's package (deploy/postgres/), not ``postgres:17``;
- ``app`` runs on the CPU (no GPU reservation, ``CAPTIONS_DEVICE=cpu``) on a loopback port over plain http
  (``CAPTIONS_ALLOWED_ORIGINS`` that origin, cookies not ``Secure``) with a short drain;
- the images are built beforehand (no ``build:``); ``app-gpu1`` and ``proxy`` are left out;
- the secrets are the check's own files; no ``.env`` is read;
- the open-files limit is capped at ``--nofile`` (the host's hard limit, where it is below the file's 65536:
  a container cannot get more than dockerd has);
- the file is one that Debian's Compose v1 (docker-compose 1.29) also accepts: no top-level ``name`` (the
  project is named with ``-p``), ``env_file`` dropped (v1 knows no ``required: false``), anchors resolved.

    python scripts/container_compose.py --out build/container-check/compose.yml --secrets DIR --port 18000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
KEEP = ("db", "migrate", "app")


class _NoAliases(yaml.SafeDumper):
    """Writes shared values (the logging block) out in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def check_compose(
    source: dict[str, Any],
    secrets: Path,
    port: int,
    app_image: str,
    db_image: str,
    drain_s: int,
    nofile: int | None = None,
) -> dict[str, Any]:
    """The check's compose configuration derived from ``source`` (docker-compose.yml, parsed)."""
    origin = f"http://127.0.0.1:{port}"
    services = {name: dict(source["services"][name]) for name in KEEP}
    services["db"]["image"] = db_image
    for name in ("migrate", "app"):
        service = services[name]
        service.pop("build", None)
        service.pop("env_file", None)
        service["image"] = app_image
        env = dict(service["environment"])
        env["CAPTIONS_ALLOWED_ORIGINS"] = json.dumps([origin])
        env["CAPTIONS_COOKIE_SECURE"] = "false"
        service["environment"] = env
    app = services["app"]
    app.pop("deploy", None)  # the GPU reservation
    app["environment"] |= {"CAPTIONS_DEVICE": "cpu", "CAPTIONS_DRAIN_TIMEOUT_S": str(drain_s)}
    app["ports"] = [f"127.0.0.1:{port}:8000"]
    limit = app.get("ulimits", {}).get("nofile")
    if nofile is not None and limit and min(limit["soft"], limit["hard"]) > nofile:
        app["ulimits"] = {**app["ulimits"], "nofile": {"soft": nofile, "hard": nofile}}
    return {
        "services": services,
        "volumes": {name: {} for name in source["volumes"]},
        "secrets": {name: {"file": str(secrets / name)} for name in source["secrets"]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=ROOT / "docker-compose.yml")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--secrets", type=Path, required=True, help="folder of the three secret files")
    parser.add_argument("--port", type=int, default=18000, help="host port of the app (127.0.0.1)")
    parser.add_argument("--app-image", default="captions:local")
    parser.add_argument("--db-image", default="captions-postgres:local")
    parser.add_argument("--drain-s", type=int, default=15, help="CAPTIONS_DRAIN_TIMEOUT_S of the app")
    parser.add_argument("--nofile", type=int, default=None, help="cap of the open-files limit (ulimit -Hn)")
    args = parser.parse_args(argv)
    source = yaml.safe_load(args.source.read_text())
    config = check_compose(
        source, args.secrets.resolve(), args.port, args.app_image, args.db_image, args.drain_s, args.nofile
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Written by scripts/container_compose.py from {args.source.name}; do not edit.\n"
    args.out.write_text(header + yaml.dump(config, Dumper=_NoAliases, sort_keys=False, width=110))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
