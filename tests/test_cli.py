"""The ``captions`` command (backend/cli.py): the service's subcommands never import the tools.

The container image holds backend/, biasing/, captions_model/ and migrations/ but not eval/, loadtest/ or
training/ (.dockerignore), so ``captions serve`` and ``captions migrate`` must start without them; the tool
subcommands import their package only when they run, and say so clearly when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("eval", "loadtest", "training", "bench", "tests")

# Runs backend.cli.main(argv) in a fresh interpreter in which the packages named in BLOCKED cannot be
# imported, as in the container image; prints which of them (or their submodules) any code tried to import.
RUNNER = r"""
import importlib.abc, json, sys

BLOCKED = set(json.loads(sys.argv[1]))
tried = []


class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".", 1)[0] in BLOCKED:
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Block())
for name in list(sys.modules):
    if name.split(".", 1)[0] in BLOCKED:
        del sys.modules[name]
code = 0
try:
    if sys.argv[2] == "--import-serve":
        import backend.app, backend.server  # noqa: E401 -- everything `captions serve` imports
    else:
        from backend.cli import main

        code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
finally:
    sys.stdout.flush()
    print("BLOCKED-IMPORTS:" + json.dumps(tried), file=sys.stderr)
sys.exit(code)
"""


def _run(
    argv: list[str], blocked: tuple[str, ...] = TOOLS, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CAPTIONS_")}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(list(blocked)), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _blocked_imports(result: subprocess.CompletedProcess[str]) -> list[str]:
    line = [x for x in result.stderr.splitlines() if x.startswith("BLOCKED-IMPORTS:")][-1]
    return list(json.loads(line.split(":", 1)[1]))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["serve", "--help"], ["migrate", "--help"], ["create-user", "--help"]],
    ids=["help", "serve", "migrate", "create-user"],
)
def test_service_commands_start_without_the_tool_packages(argv: list[str]) -> None:
    result = _run(argv)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: captions"), result.stdout
    assert _blocked_imports(result) == [], "the service's CLI imported a tool package"


def test_top_level_help_still_lists_the_tools() -> None:
    result = _run(["--help"])
    assert "loadtest" in result.stdout and "eval" in result.stdout


@pytest.mark.slow
def test_serve_imports_without_the_tool_packages() -> None:
    """Everything ``captions serve`` imports (the app, uvicorn, NeMo, torch) needs no tool package."""
    result = _run(["--import-serve"], timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert _blocked_imports(result) == []


@pytest.mark.parametrize("tool", ["loadtest", "eval"])
def test_a_missing_tool_package_is_a_clear_error(tool: str) -> None:
    result = _run([tool, "--help"])
    assert result.returncode == 3
    assert f"captions {tool}: the '{tool}' package is not installed" in result.stderr
    assert "Traceback" not in result.stderr


def test_loadtest_help_comes_from_the_loadtest_package() -> None:
    result = _run(["loadtest", "--help"], blocked=())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: captions loadtest")
    assert "--start-server" in result.stdout


def test_eval_subcommands_come_from_the_eval_package() -> None:
    result = _run(["eval", "--help"], blocked=())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: captions eval")
    assert "make-set" in result.stdout and "report" in result.stdout
    result = _run(["eval", "run", "--help"], blocked=())
    assert result.returncode == 0, result.stderr
    assert "--manifest" in result.stdout


def test_tool_options_reach_the_tool_parser() -> None:
    """Options after the tool's name are the tool's: a bad one is reported by the tool's own parser."""
    result = _run(["eval", "make-set", "--out", "unused", "--no-such-option"], blocked=())
    assert result.returncode == 2
    assert "captions eval: error: unrecognized arguments: --no-such-option" in result.stderr


def test_service_commands_still_reject_unknown_arguments() -> None:
    result = _run(["migrate", "head", "--no-such-option"])
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-option" in result.stderr
