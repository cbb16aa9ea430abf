"""The import graph (scripts/import_graph.py): no loops among our modules, and every layer imports only
the layers under it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = _ROOT / "scripts" / "import_graph.py"
MAX_MODULE_LINES = 600
"""No module of the service or the libraries grows past this (docs/architecture.md)."""


@pytest.fixture(scope="module")
def import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


def test_loops_are_found_in_a_hand_made_graph(import_graph: ModuleType) -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(import_graph.loops(edges)) == [["a", "b", "c"], ["e", "e2"]]
    assert import_graph.loops({"a": {"b"}, "b": set()}) == []


def test_layers_are_assigned_by_the_most_specific_package(import_graph: ModuleType) -> None:
    assert import_graph.layer_of("biasing.nemo.registry") == "biasing.nemo"
    assert import_graph.layer_of("biasing.compile") == "biasing"
    assert import_graph.layer_of("backend.engine.beam") == "backend.engine"
    assert import_graph.layer_of("backend.sessions.ws") == "backend.sessions"
    assert import_graph.layer_of("backend.app") == "backend"
    assert import_graph.layer_of("tests.support.server") is None
    edges = {"biasing.compile": {"biasing.nemo.compat"}, "backend.engine.decoder": {"backend.sessions.ws"}}
    assert import_graph.broken_layers(edges) == [
        "backend.engine.decoder -> backend.sessions.ws",
        "biasing.compile -> biasing.nemo.compat",
    ]


def test_the_service_domains_keep_their_directions(import_graph: ModuleType) -> None:
    edges = {
        "backend.text.vocab": {"backend.db.models", "biasing.terms"},
        "backend.edge.http_limits": {"backend.api.drafts", "backend.config"},
        "backend.meeting_view.viewer_ws": {"backend.sessions.admission", "backend.services"},
        "backend.sessions.ws": {"backend.meeting_view.feed", "backend.app"},
        "backend.db.models": {"backend.edge.security"},
    }
    assert import_graph.broken_layers(edges) == [
        "backend.db.models -> backend.edge.security",
        "backend.edge.http_limits -> backend.api.drafts",
        "backend.meeting_view.viewer_ws -> backend.sessions.admission",
        "backend.sessions.ws -> backend.app",
        "backend.text.vocab -> backend.db.models",
    ]


def test_the_project_has_no_import_loop(import_graph: ModuleType) -> None:
    assert import_graph.loops(import_graph.graph()) == []


def test_every_layer_imports_only_the_layers_under_it(import_graph: ModuleType) -> None:
    assert import_graph.broken_layers(import_graph.graph()) == []


def test_the_composition_root_is_all_that_stands_at_the_top_of_backend() -> None:
    top = sorted(path.name for path in (_ROOT / "backend").glob("*.py"))
    assert top == ["__init__.py", "app.py", "cli.py", "config.py", "server.py", "services.py"]


@pytest.mark.parametrize("package", ["backend", "biasing", "captions_model"])
def test_no_module_is_longer_than_one_reads_in_a_sitting(package: str) -> None:
    lengths = {
        str(path.relative_to(_ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (_ROOT / package).rglob("*.py")
    }
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}
