"""axe-core in the page tests: installed from the npm registry into a git-ignored folder, injected with
Playwright, and run over the whole document; only serious and critical violations fail a test.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

AXE_DIR = Path(__file__).resolve().parent / ".axe"
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
AXE_PACKAGE = "axe-core@4"
BLOCKING_IMPACTS = ("serious", "critical")


def axe_script() -> Path:
    """The path of axe.min.js, installing it with npm first when it is missing (skips without npm)."""
    if not AXE_JS.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (axe-core comes from the npm registry; make system-deps)")
        subprocess.run(
            [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(AXE_DIR), AXE_PACKAGE],
            check=True,
            capture_output=True,
        )
    return AXE_JS


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Run axe over ``page`` (injecting it once per document); every violation with its impact and nodes."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_script()))
    return page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })),
          }));
        }"""
    )


def blocking(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The violations a page must not have: serious or critical."""
    return [v for v in violations if v["impact"] in BLOCKING_IMPACTS]


def describe(where: str, violations: list[dict[str, Any]]) -> str:
    """One line per violation and its first nodes, for an assertion message."""
    lines = []
    for v in violations:
        targets = "; ".join(n["target"] for n in v["nodes"][:4])
        lines.append(f"{where}: [{v['impact']}] {v['id']} ({v['help']}) x{len(v['nodes'])}: {targets}")
    return "\n".join(lines)
