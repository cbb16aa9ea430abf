"""The project's import graph between its own packages: draws it, and checks it has no loops and keeps the
layers (``python scripts/import_graph.py [--dot]``; exit 1 on a loop or a layer broken).

Layers, bottom up (a package may import only those listed for it, and itself; docs/architecture.md draws
them):

- ``biasing``: the pure graph compiler (numpy, SentencePiece); ``biasing.nemo`` is its NeMo adapter, which
  the pure part never imports.
- ``captions_model``: the bundled models' code; imports only the pure ``biasing`` (its Whisper tokenizer
  adapter implements ``biasing.tokenizer.GraphTokenizer``).
- ``backend.engine``: the batched decoder; imports ``biasing`` and ``captions_model``, nothing of the web
  layer.
- The service (``backend``), by domain: ``backend.config`` (settings, and their mapping onto the engine's
  ``EngineConfig``) imports only the engine and the libraries;
  ``backend.text`` (pure text transforms) only the libraries; ``backend.db`` only the settings;
  ``backend.edge`` (limits, security, tickets, errors, logs, metrics) the database and settings, never
  ``backend.api`` or a domain; ``backend.meeting_view`` the edge, text and database, never
  ``backend.sessions``; ``backend.sessions`` the meeting view (its hub owns the feed), the engine, edge,
  text and database; ``backend.api`` every domain. Of the composition root (``backend``'s top-level
  modules) a domain may name ``backend.config`` and ``backend.services`` (the container every handler is
  given), nothing else; ``backend.services`` builds that container from the domains.
- ``eval``, ``loadtest``, ``training``, ``bench``: tools over the service's packages; ``tests`` may import
  anything. Only ``backend.cli`` may reach the tools (``eval``, ``loadtest``), lazily, for its sub-commands.

Imports under ``if TYPE_CHECKING:`` count: a loop there is still a loop in the design.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("backend", "biasing", "captions_model", "eval", "loadtest", "training", "bench", "tests")
SKIP_PARTS = {".venv", "build", "node_modules", "__pycache__", "var", "data"}

LIBRARIES = {"biasing", "biasing.nemo", "captions_model"}
ROOT_SHARED = {"backend.config", "backend.services"}
"""What a domain may import of the composition root: the settings and the services container."""
BELOW_DOMAINS = {"backend.config", "backend.db", "backend.edge", "backend.text"}
SERVICE = BELOW_DOMAINS | {
    "backend",
    "backend.api",
    "backend.engine",
    "backend.meeting_view",
    "backend.nemo_modules",
    "backend.services",
    "backend.sessions",
    "backend.compat",
}

ALLOWED: dict[str, set[str]] = {
    "captions_model": {"biasing"},
    "biasing": set(),
    "biasing.nemo": {"biasing"},
    "backend.engine": LIBRARIES,
    "backend.nemo_modules": {"captions_model"},
    "backend.config": {"backend.engine", *LIBRARIES},
    "backend.text": {"biasing", "captions_model"},
    "backend.db": {"backend.config"},
    "backend.edge": {"backend.config", "backend.db", *LIBRARIES},
    "backend.meeting_view": BELOW_DOMAINS | ROOT_SHARED | LIBRARIES,
    "backend.sessions": BELOW_DOMAINS | ROOT_SHARED | LIBRARIES | {"backend.meeting_view", "backend.engine"},
    "backend.api": SERVICE - {"backend", "backend.nemo_modules", "backend.compat"} | LIBRARIES,
    "backend.compat": SERVICE - {"backend", "backend.nemo_modules"} | LIBRARIES,
    "backend.services": BELOW_DOMAINS | LIBRARIES | {"backend.engine", "backend.sessions"},
    "backend": SERVICE | LIBRARIES,
    "eval": SERVICE | LIBRARIES,
    "loadtest": SERVICE | LIBRARIES,
    "training": SERVICE | LIBRARIES | {"eval"},
    "bench": SERVICE | LIBRARIES | {"tests"},
}
EXCEPTIONS = {("backend.cli", "eval"), ("backend.cli", "loadtest")}
"""(module, layer) pairs allowed outside the rules: the CLI's sub-commands import their tools lazily."""

LAYER_ORDER = sorted(ALLOWED, key=lambda name: -name.count("."))  # the most specific layer first


def find_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file, for every module of the project's packages (and bench's scripts)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if SKIP_PARTS & set(rel.parts):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _targets(node: ast.AST, package: str) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            kept = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*kept, base] if base else kept)
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` imports (anywhere in the file, TYPE_CHECKING blocks included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        for target in _targets(node, package):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    known = find_modules(root)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer_of(module: str) -> str | None:
    """The layer a module belongs to (None for tests, which may import anything)."""
    for layer in LAYER_ORDER:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def broken_layers(edges: dict[str, set[str]]) -> list[str]:
    """Every import that goes where its layer may not, as ``"a -> b"``."""
    broken = []
    for module, targets in sorted(edges.items()):
        source = layer_of(module)
        if source is None:
            continue
        for target in sorted(targets):
            into = layer_of(target)
            if into is None and target.split(".")[0] != "tests":
                continue
            into = into or "tests"
            if into == source or into in ALLOWED[source] or (module, into) in EXCEPTIONS:
                continue
            broken.append(f"{module} -> {target}")
    return broken


def layer_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Layer -> the layers it imports: the drawing of the architecture."""
    drawn: dict[str, set[str]] = {layer: set() for layer in ALLOWED}
    for module, targets in edges.items():
        source = layer_of(module)
        if source is None:
            continue
        drawn[source] |= {layer for t in targets if (layer := layer_of(t)) not in (None, source)}
    return drawn


def to_dot(drawn: dict[str, set[str]]) -> str:
    """Graphviz text of the layer graph."""
    lines = ["digraph layers {", "  rankdir=BT;"]
    lines += [f'  "{a}" -> "{b}";' for a in sorted(drawn) for b in sorted(drawn[a])]
    return "\n".join([*lines, "}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot", action="store_true", help="print the layer graph as Graphviz dot")
    args = parser.parse_args(argv)
    edges = graph()
    drawn = layer_graph(edges)
    if args.dot:
        print(to_dot(drawn))
    else:
        for layer in sorted(drawn):
            print(f"{layer:21} -> {', '.join(sorted(drawn[layer])) or '(nothing of ours)'}")
    problems = [f"loop: {' <-> '.join(c)}" for c in loops(edges)]
    problems += [f"layer: {b}" for b in broken_layers(edges)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(edges)} modules, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
