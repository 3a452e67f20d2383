"""One settings table: every default is written once, in `runtime.settings.Settings`.

Limit defaults used to live in three tables that disagreed (`reassigner steps` previewed with
P/L/R/B = 50/50/2/5 while the product ran 5/2/1/2), and the stall timeout in four places. These
tests fail as soon as a second table of defaults appears, or a preview command stops using the
product's own settings.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from handlers.policy import DYNAMIC_KEYS, Policy, parse_config_value
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.advance import compute_stepping
from planning.movement.batches import CONFIG_KEYS, Limits
from planning.movement.completion import is_step_stalled
from planning.movement.partition_steps import compute_step_sequence
from planning.simulation.simulator import SimulationParams, run_plan
from reassigner.cli import simulate as simulate_command
from runtime.settings import Settings, compute_limits, compute_policy
from tests.settings_defaults import default_settings

CONFIGURATION = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def settings_table() -> str:
    """The "## The settings" section of docs/configuration.md: the one table of every setting."""
    text = CONFIGURATION.read_text()
    assert "\n## The settings\n" in text, f"{CONFIGURATION} has no '## The settings' section"
    return text.split("\n## The settings\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture()
def clean_env(monkeypatch):
    """No REASSIGNER_* variable of the developer's shell reaches `load_settings()`."""
    import os

    for name in [n for n in os.environ if n.startswith("REASSIGNER_")]:
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("table", [Policy, Limits])
def test_policy_and_limits_have_no_defaults_of_their_own(table):
    with_default = [f.name for f in _setting_fields(table)
                    if f.default is not MISSING or f.default_factory is not MISSING]
    assert with_default == [], f"{table.__name__}: the defaults belong in Settings alone"


@pytest.mark.parametrize("table", [Policy, Limits])
def test_every_policy_and_limits_field_is_a_setting(table):
    assert {f.name for f in _setting_fields(table)} <= set(Settings.model_fields)


# `Limits.broker_moves` is the adaptive throttle's run-time state (moves in flight per broker),
# not a setting: the one field of these tables with a default (`planning.movement.batches`).
RUN_TIME_FIELDS = {"broker_moves"}


def _setting_fields(table):
    return [f for f in fields(table) if f.name not in RUN_TIME_FIELDS]


def test_the_simulator_holds_no_product_setting():
    assert not {f.name for f in fields(SimulationParams)} & set(Settings.model_fields)
    assert "stall_timeout" not in {f.name for f in fields(SimulationParams)}


@pytest.mark.parametrize("function", [run_plan, compute_stepping, is_step_stalled])
def test_the_stall_timeout_is_passed_in_never_defaulted(function):
    assert inspect.signature(function).parameters["stall_timeout"].default is inspect.Parameter.empty


def test_compute_policy_and_limits_carry_the_settings_over():
    settings = default_settings()
    policy, limits = compute_policy(settings), compute_limits(settings)
    assert all(getattr(policy, f.name) == getattr(settings, f.name) for f in fields(Policy))
    assert all(getattr(limits, f.name) == getattr(settings, f.name) for f in _setting_fields(Limits))
    changed = default_settings(max_partition_movements=7, max_leader_movements=6, max_replica_movements=3,
                               max_movements_per_broker=4, step_stall_timeout_seconds=42.0, mode="observe")
    assert compute_limits(changed) == Limits(7, 6, 3, 4)
    assert (compute_policy(changed).step_stall_timeout_seconds, compute_policy(changed).mode) == (42.0, "observe")


def test_every_dynamic_key_is_a_policy_field_and_a_setting():
    for key in DYNAMIC_KEYS.values():
        assert key.field in Settings.model_fields and key.field in {f.name for f in fields(Policy)}, key.name
    assert set(CONFIG_KEYS.values()) == {f.name for f in _setting_fields(Limits)}


def test_the_log_dir_knobs_are_offered_and_parsed():
    assert DYNAMIC_KEYS["reassignment.max.concurrent.logdir.movements.per.broker"].field == \
        "max_logdir_movements_per_broker"
    assert parse_config_value("logdir.imbalance.threshold", "0.25") == 0.25
    assert parse_config_value("replica.alter.log.dirs.io.max.bytes.per.second", "1MB") == 1_000_000


def test_the_configuration_table_shows_the_settings_defaults():
    rows = re.findall(r"^\| `(\w+)`(?: \(\w\))? \| ([\d.]+) \|", settings_table(), re.MULTILINE)
    defaults = default_settings()
    checked = {name for name, _ in rows if name in Settings.model_fields}
    assert {"max_partition_movements", "max_leader_movements", "max_replica_movements",
            "max_movements_per_broker", "step_stall_timeout_seconds"} <= checked
    for name, text in rows:
        if name in Settings.model_fields:
            assert float(text) == getattr(defaults, name), name


def _cli():
    app = typer.Typer()
    simulate_command.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


@pytest.mark.parametrize("env", [{}, {"REASSIGNER_MAX_REPLICA_MOVEMENTS": "2"}])
def test_steps_without_flags_previews_what_the_product_does(clean_env, env):
    for name, value in env.items():
        clean_env.setenv(name, value)
    result = _cli()("steps", "--from", "0,1,2", "--to", "3,4,5", "--json")
    assert result.exit_code == 0, result.output
    previewed = len(json.loads(result.output)["steps"])

    limits = compute_limits(Settings())  # the product's settings, in the same environment
    assert previewed == len(compute_step_sequence((0, 1, 2), (3, 4, 5), (0, 1, 2), limits.max_replica_movements, 1))
    # ... and the product's own decision loop takes as many steps for that partition.
    partition = PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, size_bytes=10)
    cluster = Cluster(tuple(Broker(b) for b in range(6)), (Topic("t", (partition,), 1),))
    report = run_plan(cluster, {TopicPartition("t", 0): (3, 4, 5)}, limits, SimulationParams(bytes_per_sec=10),
                      stall_timeout=Settings().step_stall_timeout_seconds)
    assert report.finished and report.steps == previewed


def test_steps_with_no_flags_and_default_settings_takes_the_products_four_steps(clean_env):
    result = _cli()("steps", "--from", "0,1,2", "--to", "3,4,5", "--json")
    assert len(json.loads(result.output)["steps"]) == 4  # R = 1: one replica in, one out, per step


def test_simulate_without_flags_runs_under_the_products_limits(clean_env, tmp_path):
    snapshot = {
        "brokers": [{"id": b, "rack": None, "alive": True, "draining": False,
                     "log_dirs": [{"path": "/d1", "online": True, "total_bytes": 10**12, "usable_bytes": 10**12}]}
                    for b in range(3)],
        "topics": [{"name": "t", "min_insync_replicas": 1, "partitions": [
            {"partition": n, "replicas": [n % 2], "isr": [n % 2], "leader": n % 2, "size_bytes": 10**6,
             "log_dirs": ["/d1"]} for n in range(4)]}],
    }
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    run = _cli()
    result = run("simulate", "--snapshot", str(path), "--remove-broker", "0", "--json")
    assert result.exit_code == 0, result.output
    limits = compute_limits(Settings())
    report = json.loads(result.output)
    assert report["limits"] == {f.name: getattr(limits, f.name) for f in _setting_fields(Limits)}
    # The estimate before the plan runs: broker 0's two 1 MB replicas leave, at the simulated rate.
    assert report["bytes_to_move"] == 2 * 10**6 and report["time_left_seconds"] == report["makespan_seconds"] > 0
    assert report["replication_rate_bytes_per_second"] == 2 * 10**6 / report["makespan_seconds"]
    text = run("simulate", "--snapshot", str(path), "--remove-broker", "0").output
    assert "bytes to move:               2,000,000" in text and "time left before it starts:" in text
    flagged = run("simulate", "--snapshot", str(path), "--remove-broker", "0", "--max-partition-movements", "9",
                  "--json")
    assert json.loads(flagged.output)["limits"]["max_partition_movements"] == 9


def test_every_setting_is_documented_in_the_configuration_table():
    documented = set(re.findall(r"^\| `(\w+)`", settings_table(), re.MULTILINE))
    documented |= {"self_healing_max_failed_fraction"}  # shares a row with ..._brokers
    assert set(Settings.model_fields) - documented == set()
