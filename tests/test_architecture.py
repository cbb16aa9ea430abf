"""The import graph (scripts/import_graph.py): no loops among our modules, and every layer imports only
the layers under it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "import_graph.py"


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
    assert import_graph.layer_of("backend.ws") == "backend"
    assert import_graph.layer_of("tests.support.server") is None
    edges = {"biasing.compile": {"biasing.nemo.compat"}, "backend.engine.decoder": {"backend.ws"}}
    assert import_graph.broken_layers(edges) == [
        "backend.engine.decoder -> backend.ws",
        "biasing.compile -> biasing.nemo.compat",
    ]


def test_the_project_has_no_import_loop(import_graph: ModuleType) -> None:
    assert import_graph.loops(import_graph.graph()) == []


def test_every_layer_imports_only_the_layers_under_it(import_graph: ModuleType) -> None:
    assert import_graph.broken_layers(import_graph.graph()) == []
