"""Usage mistakes get click's usage line and exit 2, never a traceback (regression: typer 0.29
raises its vendored copy of click's exceptions, which `main` did not recognise, so every usage
mistake ended in a Python traceback); `--version` prints the version."""

from __future__ import annotations

import sys

import pytest

from reassigner.cli.main import main


def run_main(monkeypatch, capsys, *arguments: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["reassigner", *arguments])
    code = 0
    try:
        main()
    except SystemExit as exited:
        code = exited.code or 0
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("arguments, says", [
    ((), "Usage: reassigner"),
    (("nosuch",), "No such command 'nosuch'"),
    (("run", "--nosuch"), "No such option: --nosuch"),
    (("request", "reassign"), "Missing option '--file'"),
    (("config", "set"), "Missing argument 'KEY=VALUE'"),
    (("request", "decommission", "--broker", "abc"), "Invalid value for '--broker'"),
])
def test_a_usage_mistake_prints_usage_and_exits_2(monkeypatch, capsys, arguments, says):
    code, output = run_main(monkeypatch, capsys, *arguments)
    assert code == 2 and says in output and "Traceback" not in output, output


def test_version(monkeypatch, capsys):
    code, output = run_main(monkeypatch, capsys, "--version")
    assert code == 0 and output.startswith("reassigner ")


def test_a_usage_mistake_through_the_real_entry_point():
    """`python -m reassigner.cli` in a subprocess (the installed typer raises its vendored copy of
    click's exceptions): exit 2, click's usage line, no traceback, and a flag's value that holds a
    password is not echoed back."""
    import os
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    environment = {**os.environ, "PYTHONPATH": str(repo)}
    for arguments, says in ((["execute", "--nosuch"], "No such option: --nosuch"),
                            (["status", "redis://u:hunter2-secret@h/0"], "Got unexpected extra argument")):
        result = subprocess.run([sys.executable, "-m", "reassigner.cli", *arguments], capture_output=True,
                                text=True, timeout=120, cwd=repo, env=environment)
        assert result.returncode == 2 and says in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "hunter2-secret" not in result.stderr
