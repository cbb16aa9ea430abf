"""``biasing`` is pure (numpy and SentencePiece) and only ``biasing.nemo`` imports torch or NeMo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PURE_MODULES = [
    "biasing",
    "biasing.cli",
    "biasing.compile",
    "biasing.disk_cache",
    "biasing.dot",
    "biasing.graph",
    "biasing.matching",
    "biasing.scorer",
    "biasing.terms",
    "biasing.tokenizer",
    "biasing.worker",
]
FORBIDDEN = {"torch", "nemo", "starlette", "sqlalchemy", "tokenizers"}


def _modules_after_import(*modules: str) -> set[str]:
    code = f"import json, sys, {', '.join(modules)}; print(json.dumps(sorted(sys.modules)))"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_pure_modules_import_neither_torch_nor_nemo_nor_the_web_layer() -> None:
    loaded = _modules_after_import(*PURE_MODULES)
    assert set(PURE_MODULES) <= loaded
    heavy = sorted(name for name in loaded if name.split(".")[0] in FORBIDDEN)
    assert heavy == [], f"the pure part imports {heavy[:5]}"


def test_the_nemo_adapter_is_where_nemo_comes_in() -> None:
    assert "nemo" in _modules_after_import("biasing.nemo.compat")
