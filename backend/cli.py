"""The ``captions`` command: serve, migrate and the project's long-running jobs.

``serve``, ``migrate`` and ``create-user`` import only the service. ``loadtest`` and ``eval`` are tools whose
packages are imported when their subcommand runs, never at start-up: the container image leaves them out.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from backend.config import get_settings

EXIT_MISSING_TOOL = 3


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
    from backend.edge.security import hash_password

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


def _transcribe(args: argparse.Namespace) -> int:
    from backend.compat.transcribe_cli import run

    return run(args)


def _import_tool(command: str, module: str) -> ModuleType | None:
    """``module`` of an optional tool package, or None (with a message on stderr) if it is not installed."""
    package = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (package, module):
            raise  # a dependency of the tool is missing: its own error names it
        print(
            f"captions {command}: the {package!r} package is not installed here (the container image "
            f"leaves it out); run it from a source checkout: pip install -e '.[eval]'",
            file=sys.stderr,
        )
        return None


def _loadtest(argv: list[str]) -> int:
    cli = _import_tool("loadtest", "loadtest.cli")
    if cli is None:
        return EXIT_MISSING_TOOL
    parser = argparse.ArgumentParser(prog="captions loadtest", description=cli.__doc__)
    cli.add_arguments(parser)
    return int(cli.run(parser.parse_args(argv)))


def _eval(argv: list[str]) -> int:
    main_module = _import_tool("eval", "eval.__main__")
    if main_module is None:
        return EXIT_MISSING_TOOL
    parser = argparse.ArgumentParser(prog="captions eval", description=main_module.__doc__)
    main_module.add_subcommands(parser.add_subparsers(dest="eval_command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


# Subcommands handed to another package: name -> (help, runner of the remaining arguments).
_DELEGATED: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "loadtest": ("live sessions one server holds in real time (docs/loadtest.md)", _loadtest),
    "eval": ("contextual-biasing evaluation (docs/eval.md)", _eval),
}


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
    transcribe = sub.add_parser("transcribe", help="transcribe recordings on this machine (no server)")
    transcribe.add_argument("files", nargs="+", type=Path, help="recordings: wav, flac, mp3, m4a, ogg, webm")
    transcribe.add_argument(
        "--vocabulary",
        type=Path,
        default=None,
        help="terms to boost: one per line (term<TAB>weight) or a .csv (text,weight,display,alternates)",
    )
    transcribe.add_argument("--format", choices=["json", "srt", "txt", "vtt"], default="txt")
    transcribe.add_argument("--output-dir", type=Path, default=None, help="write FILE.<format> there")
    transcribe.set_defaults(func=_transcribe)
    # The load test and the evaluation are tools, not the service: their packages (left out of the container
    # image) are imported only when their subcommand runs, and they parse their own options (_DELEGATED).
    for name, (help_text, _) in _DELEGATED.items():
        tool = sub.add_parser(name, help=help_text, add_help=False)
        tool.set_defaults(func=None, delegate=name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``captions`` console script."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    delegate: str | None = getattr(args, "delegate", None)
    if delegate is not None:
        return _DELEGATED[delegate][1](rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
