"""The layer rules (docs/design.md, "Layers"), enforced: import-linter's contracts in
pyproject.toml must hold, and they must catch the wrong imports a change could add (a contract
that cannot fail is none)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("reassigner", "streams", "runtime", "handlers", "state", "planning", "schemas")

# (module that gains the import, what it imports): each breaks a rule of the layer table
# (docs/design.md, "Layers").
WRONG_IMPORTS = [
    ("planning.model", "runtime.settings"),                     # the pure core reads the settings
    ("planning.placement.placer", "planning.simulation.simulator"),  # placement over simulation
    ("handlers.decide", "state.controller_store"),                 # a decision doing Redis I/O
    ("state.model", "handlers.policy"),                            # the state model over the handlers
    ("schemas.codec", "planning.model"),                           # the leaf schemas over the core
    ("streams.runner", "reassigner.dev.demo.story"),             # production on the dev tooling
    ("reassigner.edge.watcher", "reassigner.cli.main"),            # a process on the composition root
    ("runtime.clients.redis_io", "reassigner.edge.executor"),   # a door on a process
    ("schemas.errors", "schemas.codec"),                        # the bottom importing anything
    ("schemas.redaction", "schemas.errors"),                 # the redaction below the errors
    ("reassigner.edge.observation", "confluent_kafka"),            # a client library outside its door
    ("reassigner.operator.views", "redis"),                        # a pure view doing I/O
    ("state", "streams.runner"),                                 # a package root importing upward
    ("schemas", "state.model"),                                    # the bottom folder's root over the state
    ("runtime.settings", "streams.query"),                      # the runtime over the Spark job
    ("handlers.policy", "runtime.settings"),                       # a pure decision reading the settings
    ("runtime.backoff", "runtime.settings"),                       # the retry policy over the settings
    ("state.model", "state.controller_store"),                     # the model over its Redis store
]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    binary = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return subprocess.run([binary, "--no-cache"], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_import_contracts_hold():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture(scope="module")
def broken_copy(tmp_path_factory) -> subprocess.CompletedProcess:
    """A copy of the product with every wrong import added, linted once."""
    copy = tmp_path_factory.mktemp("wrong-imports")
    for package in PACKAGES:
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    for importer, imported in WRONG_IMPORTS:
        path = copy / importer.replace(".", "/")
        module = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        module.write_text(module.read_text() + f"\nimport {imported}  # wrong on purpose\n")
    return lint_imports(copy)


@pytest.mark.parametrize("importer, imported", WRONG_IMPORTS, ids=[f"{a}->{b}" for a, b in WRONG_IMPORTS])
def test_a_wrong_import_breaks_a_contract(broken_copy, importer, imported):
    assert broken_copy.returncode != 0
    assert f"{importer} -> {imported}" in broken_copy.stdout, broken_copy.stdout[-3000:]
