"""The ``captions`` command: serve, migrate and the project's long-running jobs."""

from __future__ import annotations

import argparse
import os
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


def _create_user(args: argparse.Namespace) -> int:
    import asyncio
    import getpass

    from backend.db.models import Role, User
    from backend.db.session import Database
    from backend.security import hash_password

    password = os.environ.get("CAPTIONS_NEW_USER_PASSWORD") or getpass.getpass(
        f"password for {args.username}: "
    )
    if len(password) < 10:
        print("the password needs at least 10 characters", file=sys.stderr)
        return 2

    async def create() -> None:
        db = Database(get_settings().database_url)
        try:
            async with db.session() as session:
                session.add(
                    User(username=args.username, password_hash=hash_password(password), role=Role(args.role))
                )
        finally:
            await db.dispose()

    asyncio.run(create())
    print(f"created {args.role} {args.username}")
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
    user = sub.add_parser(
        "create-user", help="create a user (password from CAPTIONS_NEW_USER_PASSWORD or a prompt)"
    )
    user.add_argument("username")
    user.add_argument("--role", choices=["admin", "member"], default="member")
    user.set_defaults(func=_create_user)
    from eval.__main__ import add_subcommands as add_eval_subcommands
    from loadtest.cli import add_arguments as add_loadtest_arguments
    from loadtest.cli import run as run_loadtest

    loadtest = sub.add_parser(
        "loadtest", help="live sessions one server holds in real time (docs/loadtest.md)"
    )
    add_loadtest_arguments(loadtest)
    loadtest.set_defaults(func=run_loadtest)

    evaluation = sub.add_parser("eval", help="contextual-biasing evaluation (docs/eval.md)")
    add_eval_subcommands(evaluation.add_subparsers(dest="eval_command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``captions`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
