"""The command line as a user meets it, through the real entry point (`python -m reassigner.cli`
in a subprocess, the installed typer and its vendored click): every usage mistake is one line on
stderr and exit 2, never a traceback (regression: typer 0.29 raises its vendored copy of click's
exceptions, which `main` did not recognise, so every usage mistake ended in a Python traceback,
exit 1); no command prints the help and exits 2; `--version`; shell completion; Ctrl-C or
SIGTERM while a process starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(REPO)}
for _name in [name for name in ENVIRONMENT if name.startswith("REASSIGNER_")]:
    del ENVIRONMENT[_name]  # no settings from the caller's environment


def run_cli(*arguments: str, environment: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reassigner.cli", *arguments], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=environment or ENVIRONMENT)


@pytest.mark.parametrize("arguments, says", [
    (("nosuch",), "error: No such command 'nosuch'; see 'reassigner --help'"),
    (("--nosuch",), "error: No such option: --nosuch; see 'reassigner --help'"),
    (("run", "--nosuch"), "error: No such option: --nosuch; see 'reassigner run --help'"),
    (("execute", "--bootstrap-server"), "error: Option '--bootstrap-server' requires an argument"),
    (("request", "reassign"), "error: Missing option '--file' / '--reassignment-json-file'"),
    (("snapshot",), "error: Missing option '--output'"),
    (("config", "set"), "error: Missing argument 'KEY=VALUE'"),
    (("request", "approve"), "error: Missing argument 'proposal_id'"),
    (("request", "decommission", "--broker", "abc"), "error: Invalid value for '--broker'"),
    (("local", "up", "--brokers", "x"), "error: Invalid value for '--brokers'"),
    (("status-server", "--port", "http"), "error: Invalid value for '--port'"),
    (("watch", "--poll-interval", "0"), "error: Invalid value for '--poll-interval'"),
    (("list", "extra"), "error: Got unexpected extra argument(s) (extra); see 'reassigner list --help'"),
    (("request", "nosuch"), "error: No such command 'nosuch'; see 'reassigner request --help'"),
])
def test_a_usage_mistake_is_one_line_and_exit_2(arguments, says):
    result = run_cli(*arguments)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith(says), result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == "", result.stderr


def test_a_usage_mistake_does_not_echo_a_password():
    result = run_cli("status", "redis://u:hunter2-secret@h/0")
    assert result.returncode == 2 and "Got unexpected extra argument" in result.stderr
    assert "hunter2-secret" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("arguments, usage", [
    ((), "Usage: reassigner [OPTIONS] COMMAND"),
    (("request",), "Usage: reassigner request [OPTIONS] COMMAND"),
])
def test_no_command_prints_the_help_and_exits_2(arguments, usage):
    """As git does (non-zero: nothing was done); the help goes to stdout, to be paged."""
    result = run_cli(*arguments)
    assert result.returncode == 2 and usage in result.stdout and result.stderr == "", result


def test_help_exits_0():
    result = run_cli("--help")
    assert result.returncode == 0 and "Usage: reassigner [OPTIONS] COMMAND" in result.stdout
    assert "--install-completion" in result.stdout and "--version" in result.stdout


def test_version_is_the_package_metadata():
    from importlib.metadata import version

    result = run_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"reassigner {version('kafka-reassigner')}\n")


def test_the_command_line_starts_without_the_heavy_libraries():
    """`--version` and `--help` answer at once (about 0.2 s of CPU, BENCHMARKS.md; 1.6 s when
    every command module loaded the planners, the solvers, pydantic and the Kafka client at
    import): the commands import those when they run."""
    probe = ("import sys, reassigner.cli.main; print(' '.join(sorted(m for m in ('numpy', 'ortools', 'pandas', "
             "'pydantic', 'confluent_kafka', 'kafka', 'fastavro', 'redis', 'pyspark') if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO,
                            env=ENVIRONMENT)
    assert result.returncode == 0 and result.stdout.strip() == "", result


def test_help_is_plain_text_that_names_each_flag_whole():
    result = run_cli("local", "up", "--help")
    assert result.returncode == 0 and "<bool>" not in result.stdout and "╭" not in result.stdout, result.stdout
    assert "--base-port" in result.stdout and "SPEC" not in run_cli("--help").stdout


def test_a_product_error_is_one_line_and_exit_2(tmp_path):
    result = run_cli("plan", "--snapshot", str(tmp_path / "missing.json"))
    assert result.returncode == 2 and result.stderr.startswith("error: [INVALID_REQUEST] ")
    assert result.stderr.count("\n") == 1


def test_bash_completion_completes_commands_and_flags(tmp_path):
    """The script `--show-completion` prints under bash, sourced in a real bash, completes through
    the command itself (`_REASSIGNER_COMPLETE`). Run under `bash -c`: the shell is detected from
    the process tree, so a run with no shell above it (a detached test run) found none."""
    # `&& true`: bash stays the command's parent (a lone command is exec'd in its place)
    script = subprocess.run(["bash", "-c", f"{sys.executable} -m reassigner.cli --show-completion && true"],
                            capture_output=True, text=True, timeout=120, cwd=REPO, env=ENVIRONMENT)
    assert script.returncode == 0 and "complete -o default -F _reassigner_completion reassigner" in script.stdout
    (tmp_path / "completion.sh").write_text(script.stdout)
    command = tmp_path / "reassigner"
    command.write_text(f"#!/bin/sh\nexec {sys.executable} -m reassigner.cli \"$@\"\n")
    command.chmod(0o755)

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{word}'" for word in words)
        shell = (f"source {tmp_path / 'completion.sh'}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                 f"_reassigner_completion reassigner; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60, cwd=REPO,
                                env={**ENVIRONMENT, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert complete("reassigner", "req") == ["request"]
    assert "decommission" in complete("reassigner", "request", "d")
    assert complete("reassigner", "execute", "--command-c") == ["--command-config"]
    assert {"run", "watch", "execute", "status"} <= set(complete("reassigner", ""))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_cleanly_on_a_signal_while_it_starts(tmp_path, signum):
    """`run` waiting for its Redis at start (none listens on the port; no Kafka, no Spark is
    started): SIGTERM or Ctrl-C ends it with exit 0 and one line, no traceback."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "reassigner.cli", "run", "--bootstrap-server", f"127.0.0.1:{port}",
         "--redis-url", f"redis://127.0.0.1:{port}/0", "--checkpoint-dir", str(tmp_path / "checkpoints"),
         "--verbose"],
        cwd=REPO, env=ENVIRONMENT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:  # until it waits for Redis
            line = process.stderr.readline()
            lines.append(line)
            if "will retry" in line or not line:
                break
        assert any("will retry" in line for line in lines), lines
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    err = "".join(lines) + err
    assert process.returncode == 0, err
    assert "Traceback" not in err and f"stopped on {signal.Signals(signum).name}" in err, err
