"""The layer rules of STYLE.md, enforced: import-linter's contracts in pyproject.toml must hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def test_import_contracts_hold():
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run([lint_imports, "--no-cache"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
