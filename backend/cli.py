"""The ``captions`` command: serve, migrate and the project's long-running jobs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from backend.config import get_settings


def _serve(args: argparse.Namespace) -> int:
    from backend.app import create_app
    from backend.server import DrainingServer, server_config

    settings = get_settings()
    app = create_app(settings)
    config = server_config(app, settings, args.host or settings.host, args.port or settings.port)
    DrainingServer(config, app).run()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from backend.db.migrate import upgrade

    upgrade(args.revision)
    print(f"database at {args.revision}: {get_settings().database_url.split('@')[-1]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each subcommand sets ``func``."""
    parser = argparse.ArgumentParser(prog="captions", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the service with uvicorn")
    serve.add_argument("--host", default=None, help="listen address (default: CAPTIONS_HOST)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default: CAPTIONS_PORT)")
    serve.set_defaults(func=_serve)
    migrate = sub.add_parser("migrate", help="apply database migrations (Alembic)")
    migrate.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    migrate.set_defaults(func=_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``captions`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
