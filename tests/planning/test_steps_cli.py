"""`reassigner steps` and `reassigner simulate` on a fresh Typer app (no other command modules)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from reassigner.cli import simulate as simulate_command


@pytest.fixture()
def run():
    app = typer.Typer()
    simulate_command.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_steps_prints_the_worked_example(run):
    result = run("steps", "--from", "0,1,2,3,4", "--to", "5,6,7,8,9", "--max-replica-movements", "2")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("(0, 1, 2, 3, 4)") and "start" in lines[0]
    assert lines[1].startswith("(5, 0, 1, 2, 3, 4)") and "elect 5" in lines[1]
    assert lines[-1].startswith("(5, 6, 7, 8, 9)") and "-[4] +[9]" in lines[-1]


def test_steps_json_has_exactly_the_documented_shape(run):
    result = run("steps", "--from", "0,1,2,3,4", "--to", "5,6,7,8,9", "--max-replica-movements", "2", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output) == {"steps": [
        {"target": [5, 0, 1, 2, 3, 4], "adding": [5], "removing": [], "elect_leader": True},
        {"target": [5, 6, 2, 3, 4], "adding": [6], "removing": [0, 1], "elect_leader": False},
        {"target": [5, 6, 7, 8, 4], "adding": [7, 8], "removing": [2, 3], "elect_leader": False},
        {"target": [5, 6, 7, 8, 9], "adding": [9], "removing": [4], "elect_leader": False},
    ]}


def test_steps_with_min_isr_and_isr(run):
    result = run("steps", "--from", "0,1,2", "--to", "3,4,5", "--max-replica-movements", "1",
                 "--min-isr", "3", "--isr", "0", "--json")
    first = json.loads(result.output)["steps"][0]
    assert first["adding"] == [3, 4] and first["removing"] == [] and first["elect_leader"]


@pytest.mark.parametrize("args, code", [
    (("--from", "0,x", "--to", "1"), "INVALID_REQUEST"),
    (("--from", "0,0", "--to", "1"), "INVALID_REPLICA_ASSIGNMENT"),
    (("--from", "", "--to", "1"), "INVALID_REPLICA_ASSIGNMENT"),
    (("--from", "0", "--to", "1,-1"), "INVALID_REPLICA_ASSIGNMENT"),
    (("--from", "0", "--to", "1", "--max-replica-movements", "0"), "INVALID_CONFIG"),
])
def test_bad_input_is_one_line_error_and_non_zero_exit(run, args, code):
    result = run("steps", *args)
    assert result.exit_code != 0
    assert f"[{code}]" in result.output and len(result.output.strip().splitlines()) == 1


def test_simulate_runs_a_snapshot(run, tmp_path):
    snapshot = {
        "brokers": [{"id": b, "rack": f"r{b % 3}", "alive": True, "draining": False,
                     "log_dirs": [{"path": "/d1", "online": True, "total_bytes": 10**12, "usable_bytes": 10**12}]}
                    for b in range(3)],
        "topics": [{"name": "orders", "min_insync_replicas": 2, "partitions": [
            {"partition": n, "replicas": [n % 3, (n + 1) % 3], "isr": [n % 3, (n + 1) % 3], "leader": n % 3,
             "size_bytes": 10**8, "log_dirs": ["/d1", "/d1"]} for n in range(6)]}],
    }
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    result = run("simulate", "--snapshot", str(path), "--add-broker", "3:r0", "--add-broker", "4:r1", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["invariant_violations"] == [] and report["finished"]
    assert report["peak"]["partition_movements"] <= report["limits"]["max_partition_movements"]
    text = run("simulate", "--snapshot", str(path), "--remove-broker", "2")
    assert text.exit_code == 0, text.output
    assert "invariant violations:        0" in text.output


@pytest.mark.parametrize("args", [
    ("steps", "--from", "0,0", "--to", "1"),  # a ReassignerError turned into typer.Exit(2)
    ("steps", "--from", "0", "--to", "1", "--max-replica-movements", "0"),
])
def test_the_installed_command_exits_non_zero_on_bad_input(args):
    """Through the real entry point (`reassigner.cli.main`, not standalone): the exit code of a
    `typer.Exit` must reach the shell (a failed demo or a rejected input must not exit 0)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "reassigner.cli", *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and "error: [" in result.stderr
