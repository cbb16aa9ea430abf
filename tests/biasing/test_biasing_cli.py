"""The ``python -m biasing compile`` command and DOT rendering."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from biasing.cli import main
from biasing.compile import build_graph
from biasing.dot import to_dot


def test_compile_prints_size_and_writes_dot(bpe_model_path: Path, tmp_path: Path, capsys) -> None:
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("Linezolid\nacme group\t1.5\n\n", encoding="utf-8")
    dot = tmp_path / "graph.dot"
    assert main(["compile", str(phrases), "--tokenizer", str(bpe_model_path), "--dot", str(dot)]) == 0
    out = capsys.readouterr().out
    assert "terms=2 states=" in out and "arcs=" in out and "bytes=" in out and "compile_ms=" in out
    text = dot.read_text(encoding="utf-8")
    assert text.startswith("digraph boosting {") and "doublecircle" in text and "style=dashed" in text


def test_compile_reads_the_tokenizer_inside_a_nemo_archive(
    bpe_model_path: Path, tmp_path: Path, capsys
) -> None:
    archive = tmp_path / "model.nemo"
    with tarfile.open(archive, "w") as tar:
        tar.addfile(tarfile.TarInfo("model_config.yaml"), io.BytesIO(b""))
        tar.add(bpe_model_path, arcname="abc123_tokenizer.model")
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("Husqvarna\n", encoding="utf-8")
    assert main(["compile", str(phrases), "--nemo", str(archive), "--mode", "case_sensitive_tree"]) == 0
    assert "mode=case_sensitive_tree" in capsys.readouterr().out


def test_compile_lists_rejected_terms(bpe_model_path: Path, tmp_path: Path, capsys) -> None:
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("acme\nbad\u0007term\nfine\tnot-a-number\n", encoding="utf-8")
    assert main(["compile", str(phrases), "--tokenizer", str(bpe_model_path)]) == 2
    assert "line 3: weight 'not-a-number' is not a number" in capsys.readouterr().err
    phrases.write_text("acme\nbad\u0007term\n", encoding="utf-8")
    assert main(["compile", str(phrases), "--tokenizer", str(bpe_model_path)]) == 2
    assert "term 1 ('bad\\x07term'): term contains a control character" in capsys.readouterr().err


def test_dot_refuses_large_graphs(bpe) -> None:
    graph = build_graph(["linezolid", "husqvarna"], bpe)
    with pytest.raises(ValueError, match="rendering is limited to 5"):
        to_dot(graph, bpe, max_states=5)
