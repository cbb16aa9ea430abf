"""Where the bundled model and its LM live, and which LM goes with a model (no heavy imports)."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BUNDLED_LM_PATH",
    "BUNDLED_MODEL_PATH",
    "FINAL_PASS_MODEL_PATH",
    "REPO_ROOT",
    "is_bundled",
    "resolve_final_pass",
    "resolve_lm",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_MODEL_PATH = REPO_ROOT / "models" / "captions-embedded.nemo"
BUNDLED_LM_PATH = REPO_ROOT / "models" / "captions-embedded-lm.nemo"
FINAL_PASS_MODEL_PATH = REPO_ROOT / "models" / "captions-final-pass.pt"


def is_bundled(model: str) -> bool:
    """Whether ``model`` names the bundled model file."""
    return Path(model).resolve() == BUNDLED_MODEL_PATH.resolve()


def resolve_lm(model: str, lm: str) -> str | None:
    """``lm`` is a path, ``none``, or ``auto``: the bundled LM when ``model`` is the bundled model (an LM is
    tied to its model's vocabulary), else none."""
    if lm == "none":
        return None
    if lm != "auto":
        return lm
    return str(BUNDLED_LM_PATH) if is_bundled(model) and BUNDLED_LM_PATH.is_file() else None


def resolve_final_pass(model: str, final_pass: str) -> str:
    """``final_pass`` is ``off``, ``decode`` or ``auto``: the second pass on with the bundled model (its
    finals gain most from it; models/MODEL_CARD.md), off with a model someone chose, unless configured."""
    if final_pass != "auto":
        return final_pass
    return "decode" if is_bundled(model) and FINAL_PASS_MODEL_PATH.is_file() else "off"
