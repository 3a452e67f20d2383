"""The Grafana dashboard and the Prometheus alert rules (docs/) hold to the metrics the code defines.

`promtool` (Debian's `prometheus` package, installed by `make system-packages`) checks the rules
and the dashboard's queries, and runs the rules on made-up series: a missing promtool FAILS
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


def test_the_rules_fire_on_a_stopped_pipeline_and_failing_commands(tmp_path):
    """`promtool test rules` on made-up series: no batch for 10 minutes fires
    ReassignerPipelineNoBatch; a steady stream of failed commands fires ReassignerExecutorErrors;
    a healthy executor fires nothing; a state store found lost fires ReassignerStateStoreLost."""
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                # the last batch at t=0: the gauge stays at 0 while time goes on
                {"series": 'reassigner_pipeline_last_batch_timestamp_seconds{job="pipeline"}', "values": "0x20"},
                {"series": 'reassigner_executor_commands_total{job="executor",kind="ReassignmentStep",'
                           'outcome="REASSIGNMENT_IN_PROGRESS"}', "values": "0+10x30"},
                {"series": 'reassigner_executor_commands_total{job="executor",kind="ReassignmentStep",outcome="ok"}',
                 "values": "0+10x30"},
                # the store found lost once, at t=12m
                {"series": 'reassigner_pipeline_state_store_lost_total{job="pipeline"}', "values": "0x11 1x20"},
            ],
            "alert_rule_test": [
                {"eval_time": "3m", "alertname": "ReassignerPipelineNoBatch", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "ReassignerPipelineNoBatch", "exp_alerts": [{
                    "exp_labels": {"severity": "critical"},
                    "exp_annotations": {
                        "summary": "The pipeline has committed no batch for more than 5 minutes",
                        "description": "Last batch 10m 0s ago: the Spark query is stuck, failing, or "
                                       "Redis/Kafka is away."}}]},
                {"eval_time": "5m", "alertname": "ReassignerExecutorErrors", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "ReassignerExecutorErrors", "exp_alerts": [{
                    "exp_labels": {"severity": "warning"},
                    "exp_annotations": {
                        "summary": "The executor's commands keep failing",
                        "description": "0.17 failed commands per second over 5 minutes (see the CommandFailed "
                                       "alerts and `reassigner alerts`)."}}]},
                {"eval_time": "10m", "alertname": "ReassignerStateStoreLost", "exp_alerts": []},
                {"eval_time": "14m", "alertname": "ReassignerStateStoreLost", "exp_alerts": [{
                    "exp_labels": {"severity": "critical"},
                    "exp_annotations": {
                        "summary": "Redis lost or rolled back the product's state",
                        "description": "The pipeline found its state store emptied or restored from an older "
                                       "copy and put the state back (the StateStoreLost alert says how). Check "
                                       "Redis: persistence (AOF), failovers, restores."}}]},
            ],
        }],
    }
    path = tmp_path / "alerts_test.yml"
    path.write_text(json.dumps(tests))  # JSON is YAML
    run = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
