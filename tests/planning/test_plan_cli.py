"""`reassigner plan` end to end on files, through a fresh typer app (CliRunner)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from placement_checks import hard_constraint_violations
from planning.model import Broker
from planning.placement.goal import Goal
from planning.snapshot import cluster_from_json, reassignment_from_json
from reassigner.cli.plan import register
from schemas.errors import MalformedInputError


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # keep `plan` a sub-command
    return app


def snapshot(tmp_path):
    data = {
        "brokers": [{"id": i, "rack": f"r{i % 3}"} for i in range(6)],
        "topics": [{"name": "orders", "partitions": [
            {"partition": p, "replicas": [p % 6, (p + 1) % 6, (p + 2) % 6], "size_bytes": 100} for p in range(24)
        ]}],
    }
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    return path, data


def test_a_bytes_plan_names_the_removed_broker(app, tmp_path):
    """`--balance-mode bytes`: the summary reports bytes moved against their bound, every broker
    within its bands, and the removed broker (not balanced, emptied) at 0, as the count planner's
    summary does (regression: the bytes summary left it out)."""
    path, _ = snapshot(tmp_path)
    summary = tmp_path / "summary.json"
    result = CliRunner().invoke(app, [
        "plan", "--snapshot", str(path), "--add-broker", "6:r0", "--add-broker", "7:r1",
        "--add-broker", "8:r2", "--remove-broker", "1", "--output", str(tmp_path / "plan.json"),
        "--summary-json", str(summary), "--balance-mode", "bytes",
    ])
    assert result.exit_code == 0, result.output
    facts = json.loads(summary.read_text())
    assert facts["balance_mode"] == "bytes" and facts["within_tolerance"] is True
    assert facts["bytes_moved"] >= facts["bytes_moved_lower_bound"] > 0
    assert facts["replicas_after"]["1"] == 0 and facts["replicas_before"]["1"] > 0
    assert facts["leaders_after"]["1"] == 0 and facts["rack_violations"] == 0


def test_plan_writes_reassignment_and_summary(app, tmp_path):
    path, data = snapshot(tmp_path)
    out, summary = tmp_path / "plan.json", tmp_path / "summary.json"
    result = CliRunner().invoke(app, [
        "plan", "--snapshot", str(path), "--add-broker", "6:r0", "--add-broker", "7:r1",
        "--add-broker", "8:r2", "--remove-broker", "1", "--output", str(out), "--summary-json", str(summary),
        "--balance-mode", "strict",
    ])
    assert result.exit_code == 0, result.output
    facts = json.loads(summary.read_text())
    for key in ("replica_moves", "replica_moves_lower_bound", "bytes_moved", "leader_changes",
                "replicas_before", "replicas_after", "leaders_before", "leaders_after", "warnings"):
        assert key in facts
    assert facts["rack_violations"] == 0
    assert facts["replicas_after"]["1"] == 0
    # The honest summary: proven fewest (or the gap), and balance measured against the shares.
    assert facts["replica_moves_optimum"] in (None, facts["replica_moves"])
    assert facts["gap_percent"] == (0 if facts["replica_moves_optimum"] is not None else facts["gap_percent"])
    assert facts["replicas_outside_share"] == 0 and facts["leaders_outside_share"] == 0
    assert facts["cluster_leader_spread"] <= 1
    targets = reassignment_from_json(json.loads(out.read_text()), "plan.json")
    assert len(targets) == facts["partitions_changed"] > 0
    cluster = cluster_from_json(data, "snap")
    goal = Goal(add_brokers=(Broker(6, "r0"), Broker(7, "r1"), Broker(8, "r2")), drain_brokers=frozenset({1}))

    class Plan:
        pass

    plan = Plan()
    plan.targets = {tp: r for tp, (r, _) in targets.items()}
    assert hard_constraint_violations(cluster, goal, plan) == []
    assert "replica moves" in result.output  # the summary (stderr is mixed in by CliRunner)


def test_plan_to_stdout(app, tmp_path):
    path, _ = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--add-broker", "6"])
    assert result.exit_code == 0
    assert '"version": 1' in result.output


def test_bad_json_names_file_line_and_column(app, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"brokers": [\n  {"id": 1,}\n]}')
    result = CliRunner().invoke(app, ["plan", "--snapshot", str(path)])
    assert isinstance(result.exception, MalformedInputError)
    assert "broken.json" in str(result.exception) and "line 2 column" in str(result.exception)


def test_bad_add_broker_flag(app, tmp_path):
    path, _ = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--add-broker", "x:r1"])
    assert isinstance(result.exception, MalformedInputError)


def test_plan_in_bytes_mode_proves_bytes_and_reports_each_resource(app, tmp_path):
    """`--balance-mode bytes` on partitions of four decades of size: three brokers added get
    their share of the bytes (the count planner fills them with the smallest replicas), the plan
    reports its bytes against a bound and each resource's spread before and after."""
    data = {
        "brokers": [{"id": i, "rack": f"r{i % 3}"} for i in range(6)],
        "topics": [{"name": name, "partitions": [
            {"partition": p, "replicas": [p % 6, (p + 1) % 6, (p + 2) % 6], "size_bytes": 10 ** (3 + (p * 5 + k) % 4)}
            for p in range(count)]} for k, (name, count) in enumerate((("orders", 48), ("audit", 24)))],
    }
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    summaries = {}
    for mode in ("BYTES", "strict"):
        summary = tmp_path / f"{mode}.json"
        result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--add-broker", "6:r0", "--add-broker",
                                          "7:r1", "--add-broker", "8:r2", "--balance-mode", mode, "--summary-json",
                                          str(summary), "--output", str(tmp_path / f"{mode}-plan.json")])
        assert result.exit_code == 0, result.output
        summaries[mode.lower()] = json.loads(summary.read_text())
    by_bytes, by_count = summaries["bytes"], summaries["strict"]
    assert by_bytes["balance_mode"] == "bytes" and by_bytes["rack_violations"] == 0
    assert 0 < by_bytes["bytes_moved_lower_bound"] <= by_bytes["bytes_moved"]
    assert set(by_bytes["resources"]) == {"disk", "replicas", "leaders"}
    disk = by_bytes["resources"]["disk"]
    assert disk["after"]["cv"] < disk["before"]["cv"] and disk["before"]["outside"] > 0
    assert by_bytes["within_tolerance"] is all(r["after"]["outside"] == 0 for r in by_bytes["resources"].values())
    assert (by_bytes["gap_percent"] is None) is (not by_bytes["within_tolerance"])

    def new_brokers_share(summary: dict) -> float:
        held = {int(b): v for b, v in summary["bytes_after"].items()}
        mean = sum(held.values()) / len(held)
        return min(held[b] for b in (6, 7, 8)) / mean
    assert new_brokers_share(by_bytes) >= 0.9 > new_brokers_share(by_count)
    assert by_count["balance_mode"] == "strict" and by_count["bytes_moved_lower_bound"] is None


def test_an_unknown_balance_mode_is_refused_in_one_line(app, tmp_path):
    path, _ = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--balance-mode", "fastest"])
    assert isinstance(result.exception, MalformedInputError)
    assert "one of strict, bytes" in str(result.exception)


def test_a_disk_budget_caps_the_bytes_and_reports_the_band_it_bought(app, tmp_path):
    """`--disk-budget`: the plan moves at most the budget, and the summary names the band."""
    data = {
        "brokers": [{"id": i, "rack": f"r{i % 3}"} for i in range(6)],
        "topics": [{"name": "orders", "partitions": [
            {"partition": p, "replicas": [p % 6, (p + 1) % 6, (p + 2) % 6], "size_bytes": 10 ** (3 + p % 4)}
            for p in range(48)]}],
    }
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    facts = {}
    for budget in ("0", "2kb", "10MiB"):
        summary = tmp_path / f"{budget}.json"
        result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--add-broker", "6:r0", "--balance-mode",
                                          "bytes", "--disk-budget", budget, "--summary-json", str(summary),
                                          "--output", str(tmp_path / "plan.json")])
        assert result.exit_code == 0, result.output
        facts[budget] = json.loads(summary.read_text())
    assert facts["0"]["byte_budget"] is None and facts["0"]["disk_tolerance"] == 0.1  # 0: off
    assert facts["2kb"]["byte_budget"] == 2000 and facts["10MiB"]["byte_budget"] == 10 * 1024 ** 2
    assert facts["10MiB"]["bytes_moved"] <= 10 * 1024 ** 2
    assert facts["10MiB"]["disk_tolerance"] < 0.1 < facts["2kb"]["disk_tolerance"]
    assert "the tightest a plan moving at most" in result.output


@pytest.mark.parametrize("text", ["-5", "lots", "11000TB", "1.5GB"])
def test_a_bad_disk_budget_is_refused_in_one_line(app, tmp_path, text):
    path, _ = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["plan", "--snapshot", str(path), "--disk-budget", text])
    assert isinstance(result.exception, MalformedInputError)
    assert "bytes from 0 to 10 PB" in str(result.exception) and "\n" not in str(result.exception)
