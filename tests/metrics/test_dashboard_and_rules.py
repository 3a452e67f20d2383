"""The Grafana dashboard and the Prometheus alert rules (docs/) hold to the metrics the code defines.

`promtool` (Debian's `prometheus` package, installed by `make system-packages`) checks the rules
and the dashboard's queries, and runs the rules on made-up series of two clusters (every rule
fires per cluster, for the cluster in trouble only): a missing promtool FAILS
these tests (it must not let broken rules pass in CI unseen).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.metrics import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "kafka-reassigner.json"
RULES = ROOT / "docs" / "prometheus" / "alerts.yml"
NAME = re.compile(r"\b(reassigner_[a-z0-9_]+)\b")


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make system-packages` installs it (Debian package prometheus)"
    return found


def dashboard_exprs() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    panels = [p for top in document["panels"] for p in (top, *top.get("panels", ()))]
    return [target["expr"] for panel in panels for target in panel.get("targets", ())]


def rule_exprs() -> list[str]:
    """Each rule's `expr:` (one line each in the file; no YAML library in the product)."""
    text = RULES.read_text()
    exprs = re.findall(r"^\s+expr: (.+)$", text, re.MULTILINE)
    assert len(exprs) == len(re.findall(r"^\s+- alert: ", text, re.MULTILINE))
    return exprs


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_only_metric_names_the_code_defines_are_queried(source):
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    assert exprs
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert used and used <= METRIC_NAMES, f"not defined in runtime/metrics.py: {sorted(used - METRIC_NAMES)}"


def test_the_dashboard_shows_every_metric():
    used = {name for expr in dashboard_exprs() for name in NAME.findall(expr)}
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in METRIC_NAMES}
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    assert families - shown == set()


def test_promtool_checks_the_alert_rules():
    check = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout


def test_every_dashboard_query_is_valid_promql(tmp_path):
    """Each panel's query as a recording rule: promtool parses it (Grafana's `$__rate_interval` as 5m)."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr.replace("$__rate_interval", "5m")}
        for i, expr in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    check = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


# --- the rules on made-up series of two clusters, "a" and "b" (`promtool test rules`) ------------
# Every rule aggregates `by (cluster)`: trouble in one cluster fires for that cluster only, never
# hidden by the other's healthy series. Each scenario lists, at each eval time, the alerts that
# FIRE; every other rule of the file is checked at the same time to fire nothing (exp_alerts: []).
MINUTES = 40


def alert_names() -> list[str]:
    return re.findall(r"^\s+- alert: (\S+)$", RULES.read_text(), re.MULTILINE)


def cluster_series(cluster: str, *, pipeline_for: int | None = MINUTES, stuck: bool = False, watcher: bool = True,
                   executor: bool = True, failing: bool = False, refused_at: int | None = None,
                   store_lost_at: int | None = None, polls_failing: bool = False,
                   pipeline_unwell: bool = False) -> list[dict]:
    """One cluster's series, healthy unless told: its pipeline scraped for `pipeline_for` minutes
    (None: never), committing a batch every minute (`stuck`: its last batch at t=0); its watcher
    polling; its executor applying commands (`failing`: 10 failed commands a minute as well;
    `refused_at`: one STALE_EPOCH refusal at that minute); `store_lost_at`: the state store found
    lost at that minute; `polls_failing`: every poll fails; `pipeline_unwell`: 2 min of lag, steps
    in flight that never complete, a ReassignmentStalled alert at 8m, 3 offline partitions."""
    def values(start: float, step: float, until: int = MINUTES) -> str:
        present = f"{start:g}+{step:g}x{until}"
        return present if until == MINUTES else f"{present} _x{MINUTES - until}"

    def step_at(minute: int | None, until: int = MINUTES) -> str:
        if minute is None:
            return values(0, 0, until)
        return f"0x{minute - 1} 1x{until - minute}" + ("" if until == MINUTES else f" _x{MINUTES - until}")

    series: list[tuple[str, str, str, str]] = []  # (job, name, extra labels, values)
    if pipeline_for is not None:
        n = pipeline_for
        series += [
            ("pipeline", "reassigner_pipeline_last_batch_timestamp_seconds", "",
             values(0, 0 if stuck else 60, n)),
            ("pipeline", "reassigner_pipeline_lag_seconds", "", values(120 if pipeline_unwell else 1, 0, n)),
            ("pipeline", "reassigner_pipeline_state_store_lost_total", "", step_at(store_lost_at, n)),
            ("pipeline", "reassigner_steps_in_flight", "", values(2, 0, n)),
            ("pipeline", "reassigner_steps_completed_total", "", values(0, 0 if pipeline_unwell else 1, n)),
            ("pipeline", "reassigner_pipeline_alerts_total", ',kind="ReassignmentStalled"',
             step_at(8 if pipeline_unwell else None, n)),
        ]
    if watcher:
        series.append(("watcher", "reassigner_watcher_polls_total", ',outcome="ok"',
                       values(0, 0 if polls_failing else 12)))
        if polls_failing:
            series.append(("watcher", "reassigner_watcher_polls_total", ',outcome="UNKNOWN_SERVER_ERROR"',
                           values(0, 12)))
    if executor:
        series += [
            ("executor", "reassigner_executor_commands_total", ',kind="ReassignmentStep",outcome="ok"', values(0, 10)),
            ("executor", "reassigner_executor_refused_commands_total", ',reason="STALE_EPOCH"', step_at(refused_at)),
        ]
        if failing:
            series.append(("executor", "reassigner_executor_commands_total",
                           ',kind="ReassignmentStep",outcome="REASSIGNMENT_IN_PROGRESS"', values(0, 10)))
    series.append(("status", "reassigner_offline_partitions", "", values(3 if pipeline_unwell else 0, 0)))
    return [{"series": f'{name}{{cluster="{cluster}",job="{job}",instance="{cluster}-{job}:9400"{extra}}}',
             "values": vals} for job, name, extra, vals in series]


def firing(cluster: str | None, severity: str, summary: str, description: str | None = None, **labels) -> dict:
    """An alert as promtool shows it: the rule's labels and the series' (cluster, reason...)."""
    annotations = {"summary": summary} | ({} if description is None else {"description": description})
    return {"exp_labels": ({} if cluster is None else {"cluster": cluster}) | labels | {"severity": severity},
            "exp_annotations": annotations}


NO_BATCH_DESCRIPTION = "Last batch {} ago: the Spark query is stuck, failing, or Redis/Kafka is away."
STORE_LOST_DESCRIPTION = ("The pipeline found its state store emptied or restored from an older copy and put the "
                          "state back (the StateStoreLost alert says how). Check Redis: persistence (AOF), "
                          "failovers, restores.")
REFUSED_DESCRIPTION = ("BAD_SIGNATURE or UNKNOWN_EPOCH: someone else writes the commands topic; STALE_EPOCH: two "
                       "pipelines; COMMAND_EXPIRED: an old backlog.")


EXECUTOR_ERRORS_IN_B = firing("b", "warning", "cluster b: the executor's commands keep failing",
                              "0.17 failed commands per second over 5 minutes (see the CommandFailed alerts and "
                              "`reassigner alerts`).")


OFFLINE_IN_B = firing("b", "critical", "cluster b: 3 partitions have no leader")


def pipeline_down_in(cluster: str) -> dict:
    return firing(cluster, "critical", f"cluster {cluster}: its watcher or executor is scraped but its pipeline "
                                       "exports no metrics (not running, or not scraped)")


def process_down_in(cluster: str, process: str) -> dict:
    return firing(cluster, "critical", f"cluster {cluster}: its pipeline is scraped but its {process} exports no "
                                       "metrics (not running, or not scraped)")


# scenario: (input series, {eval time: {alert name: alerts firing}}); alert names left out fire nothing
SCENARIOS: dict[str, tuple[list[dict], dict[str, dict[str, list[dict]]]]] = {
    "both_clusters_healthy": (
        cluster_series("a") + cluster_series("b"),
        {"3m": {}, "10m": {}, "20m": {}, "39m": {}}),
    "cluster_b_pipeline_stuck": (
        # b's last batch at t=0 while a's pipeline commits every minute
        cluster_series("a") + cluster_series("b", stuck=True),
        {"3m": {},
         "10m": {"ReassignerPipelineNoBatch": [firing(
             "b", "critical", "cluster b: the pipeline has committed no batch for more than 5 minutes",
             NO_BATCH_DESCRIPTION.format("10m 0s"))]}}),
    "cluster_b_pipeline_missing": (
        # b's pipeline scraped until 3m, then gone (its series vanish after Prometheus' 5m lookback,
        # before its last batch is 5 minutes old: no NoBatch); b's watcher and executor still
        # scraped, a's pipeline too: absent() cannot fire, the per-cluster rule does (for: 5m)
        cluster_series("a") + cluster_series("b", pipeline_for=3),
        {"7m": {}, "12m": {},
         "15m": {"ReassignerPipelineDownInCluster": [pipeline_down_in("b")]}}),
    "cluster_b_pipeline_never_scraped_executor_only": (
        # b runs only an executor (no watcher): it still names the cluster whose pipeline is missing
        cluster_series("a") + cluster_series("b", pipeline_for=None, watcher=False),
        {"4m": {}, "6m": {"ReassignerPipelineDownInCluster": [pipeline_down_in("b")]}}),
    "no_pipeline_at_all": (
        # no cluster's pipeline is scraped: the absent() rule fires (no cluster label), and the
        # per-cluster rule for each cluster whose watcher or executor is scraped
        cluster_series("a", pipeline_for=None) + cluster_series("b", pipeline_for=None),
        {"4m": {},
         "6m": {"ReassignerPipelineDown": [firing(
                    None, "critical", "No pipeline of any cluster exports metrics (not running, or not scraped)")],
                "ReassignerPipelineDownInCluster": [pipeline_down_in("a"), pipeline_down_in("b")]}}),
    "cluster_b_watcher_and_executor_missing": (
        # b's pipeline is scraped, its watcher and executor are not; a's three are
        cluster_series("a") + cluster_series("b", watcher=False, executor=False),
        {"4m": {},
         "6m": {"ReassignerWatcherDownInCluster": [process_down_in("b", "watcher")],
                "ReassignerExecutorDownInCluster": [process_down_in("b", "executor")]}}),
    "cluster_b_executor_errors": (
        # b's executor fails 10 commands a minute and refuses one at 15m; a's applies every command
        cluster_series("a") + cluster_series("b", failing=True, refused_at=15),
        {"9m": {},  # failing since 1m, `for: 10m`: pending
         "14m": {"ReassignerExecutorErrors": [EXECUTOR_ERRORS_IN_B]},
         "20m": {"ReassignerExecutorErrors": [EXECUTOR_ERRORS_IN_B],
                 "ReassignerExecutorRefusedCommands": [firing(
                     "b", "critical", "cluster b: the executor refused commands (STALE_EPOCH)", REFUSED_DESCRIPTION,
                     reason="STALE_EPOCH")]}}),
    "cluster_b_watcher_polls_failing": (
        cluster_series("a") + cluster_series("b", polls_failing=True),
        {"4m": {},
         "10m": {"ReassignerWatcherPollErrors": [firing(
             "b", "critical", "cluster b: every watcher poll fails: the controller is blind to the cluster",
             "See the watcher's log: the Admin API error codes are the `outcome` label.")]}}),
    "cluster_b_pipeline_unwell": (
        cluster_series("a") + cluster_series("b", pipeline_unwell=True),
        {"4m": {"ReassignerOfflinePartitions": [OFFLINE_IN_B]},
         "10m": {"ReassignerOfflinePartitions": [OFFLINE_IN_B],
                 "ReassignerPipelineLagHigh": [firing(
                     "b", "warning", "cluster b: the pipeline decides more than 60 s after the events happened",
                     "Oldest input of the last batch was 2m 0s old at its commit.")],
                 "ReassignerStepStalled": [firing(
                     "b", "warning", "cluster b: reassignment steps are in flight but none completed in 30 minutes",
                     "See `reassigner list` and the ReassignmentStalled alerts (step_stall_timeout_seconds).")],
                 "ReassignerStallAlerts": [firing(
                     "b", "warning", "cluster b: the pipeline raised a stall alert in the last 15 minutes")]}}),
    "cluster_b_state_store_lost": (
        cluster_series("a") + cluster_series("b", store_lost_at=12),
        {"10m": {},
         "14m": {"ReassignerStateStoreLost": [firing(
             "b", "critical", "cluster b: Redis lost or rolled back the product's state", STORE_LOST_DESCRIPTION)]}}),
}


def run_promtool_tests(tmp_path: Path, series: list[dict], expected: dict[str, dict[str, list[dict]]],
                       names: list[str]) -> subprocess.CompletedProcess:
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": fired.get(name, [])}
                                for at, fired in expected.items() for name in names],
        }],
    }
    path = tmp_path / "alerts_test.yml"
    path.write_text(json.dumps(tests))  # JSON is YAML
    return subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_rules_fire_per_cluster(scenario, tmp_path):
    """At each eval time, exactly the listed alerts fire (labels and annotations as listed),
    every other rule fires nothing: trouble in cluster "b" fires for "b" only."""
    series, expected = SCENARIOS[scenario]
    names = alert_names()
    assert {name for fired in expected.values() for name in fired} <= set(names)
    run = run_promtool_tests(tmp_path, series, expected, names)
    assert run.returncode == 0, run.stdout + run.stderr


def test_promtool_fails_a_wrong_expectation(tmp_path):
    """The harness can fail: expecting cluster "a" to fire too when only "b" is stuck, or nothing
    to fire, fails `promtool test rules`."""
    series, expected = SCENARIOS["cluster_b_pipeline_stuck"]
    [alert] = expected["10m"]["ReassignerPipelineNoBatch"]
    also_a = {"exp_labels": alert["exp_labels"] | {"cluster": "a"}, "exp_annotations": alert["exp_annotations"]
              | {"summary": alert["exp_annotations"]["summary"].replace("cluster b", "cluster a")}}
    for wrong in ([alert, also_a], []):
        run = run_promtool_tests(tmp_path, series, {"10m": {"ReassignerPipelineNoBatch": wrong}},
                                 ["ReassignerPipelineNoBatch"])
        assert run.returncode != 0 and "ReassignerPipelineNoBatch" in run.stdout + run.stderr, run.stdout
