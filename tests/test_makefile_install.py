"""`make install`'s Python part on a copy of the repository (issue 19 item 8): a venv is trusted
only when its pip runs, so one made without python3-venv (a `.venv/bin/python` and no pip) or
cut short is made again; a second run does nothing; the lock file pins every package by version
and hash, and pyproject's ranges admit the locked versions.

The install test uses a one-package lock (`LOCK=`) to test the Makefile's logic in seconds, not
the real lock's 1 GB; it needs PyPI (setuptools for the editable install's build), so it is
`slow`. The real lock was installed the same way, from scratch, when it was made.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ONE_PACKAGE_LOCK = """\
six==1.17.0 \\
    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274 \\
    --hash=sha256:ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81
"""


def locked_versions() -> dict[str, str]:
    text = (REPO / "requirements.lock").read_text()
    return {name.lower().replace("_", "-"): version
            for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.MULTILINE)}


def test_every_locked_package_has_a_hash_and_every_dependency_is_locked():
    text = (REPO / "requirements.lock").read_text()
    entries = re.split(r"\n(?=[A-Za-z])", text.split("\n", 2)[2].strip())
    assert entries and all("--hash=sha256:" in entry for entry in entries)
    versions = locked_versions()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-")
        assert name in versions, f"{name} is not in requirements.lock; run make lock"
    assert versions["typer"].startswith("0.29."), "typer's error handling is tested with 0.29 (see main.py)"


def test_the_lock_matches_pyprojects_ranges():
    packaging = pytest.importorskip("packaging.requirements")
    versions = locked_versions()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        parsed = packaging.Requirement(requirement.split("#")[0])
        name = parsed.name.lower().replace("_", "-")
        assert parsed.specifier.contains(versions[name], prereleases=True), (requirement, versions[name])


def make(copy: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(copy), *targets, "LOCK=one-package.lock",
                           f"PYTHON={sys._base_executable}"],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.long
def test_a_venv_without_pip_is_made_again_and_a_second_run_does_nothing(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("Makefile", "pyproject.toml", "README.md", "requirements.lock"):
        shutil.copy(REPO / name, copy / name)
    (copy / "reassigner").mkdir()
    (copy / "reassigner" / "__init__.py").write_text("")
    (copy / "one-package.lock").write_text(ONE_PACKAGE_LOCK)
    venv_python = copy / ".venv" / "bin" / "python"

    first = make(copy, "python-packages")
    assert first.returncode == 0, first.stdout + first.stderr
    assert (copy / ".venv" / ".installed").exists()
    assert subprocess.run([venv_python, "-c", "import six"]).returncode == 0

    again = make(copy, "python-packages")
    assert again.returncode == 0 and "pip install" not in again.stdout, again.stdout  # nothing to do

    # What `python3 -m venv` leaves without python3-venv: a python, no pip; the old stamp stays.
    shutil.rmtree(copy / ".venv")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(copy / ".venv")], check=True)
    (copy / ".venv" / ".installed").touch()
    repaired = make(copy, "python-packages")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert ".venv has no working pip" in repaired.stdout, repaired.stdout
    assert subprocess.run([venv_python, "-m", "pip", "--version"], capture_output=True).returncode == 0
    assert subprocess.run([venv_python, "-c", "import six"]).returncode == 0
