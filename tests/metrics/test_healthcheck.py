"""`reassigner healthcheck`: the container health check of the compose deployment. The rule is
pure (`compute_unhealthy`); the command is run as a probe runs it, against a real endpoint
served by `serve_metrics` in this process."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from runtime.metrics import PIPELINE_LAST_BATCH_TIME, compute_unhealthy, process_registry, render_registry, serve_metrics

NOW = 1_700_000_000.0


def exposition(last_batch: float | None) -> str:
    if last_batch is None:
        return "# HELP reassigner_watcher_polls_total x\n# TYPE reassigner_watcher_polls_total counter\n" \
               'reassigner_watcher_polls_total{outcome="ok",cluster="c"} 3.0\n'
    return ("# HELP reassigner_pipeline_last_batch_timestamp_seconds x\n"
            "# TYPE reassigner_pipeline_last_batch_timestamp_seconds gauge\n"
            f'reassigner_pipeline_last_batch_timestamp_seconds{{cluster="c"}} {last_batch}\n')


def test_a_process_without_a_batch_gauge_is_healthy_when_it_answers():
    assert compute_unhealthy(exposition(None), NOW, 300) is None


def test_a_pipeline_is_healthy_while_its_last_batch_is_recent_and_while_it_has_none_yet():
    assert compute_unhealthy(exposition(NOW - 299), NOW, 300) is None
    assert compute_unhealthy(exposition(0.0), NOW, 300) is None  # Spark starting


def test_a_pipeline_whose_last_batch_is_old_is_unhealthy_and_says_how_old():
    why = compute_unhealthy(exposition(NOW - 301), NOW, 300)
    assert why is not None and "301 s ago" in why and "300 s" in why


def test_an_endpoint_answering_no_prometheus_text_is_unhealthy():
    assert "no Prometheus text" in compute_unhealthy("<html>\n{not metrics\n", NOW, 300)


def test_the_pipeline_registry_as_served_passes_the_rule():
    assert compute_unhealthy(render_registry(process_registry("pipeline")).decode(), NOW, 300) is None


def healthcheck(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reassigner.cli", "healthcheck", *arguments],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def pipeline_endpoint():
    server, port = serve_metrics("127.0.0.1", 0, "pipeline", "compose")
    before = PIPELINE_LAST_BATCH_TIME._value.get()
    yield port
    PIPELINE_LAST_BATCH_TIME.set(before)
    server.shutdown()


def test_the_command_exits_0_on_a_live_endpoint_and_1_in_one_line_on_a_stuck_pipeline(pipeline_endpoint):
    import time

    PIPELINE_LAST_BATCH_TIME.set(time.time())
    healthy = healthcheck("--port", str(pipeline_endpoint))
    assert healthy.returncode == 0 and healthy.stdout.startswith("healthy: "), healthy
    PIPELINE_LAST_BATCH_TIME.set(time.time() - 900)
    stuck = healthcheck("--port", str(pipeline_endpoint), "--max-batch-age", "600")
    assert stuck.returncode == 1 and stuck.stderr.count("\n") == 1, stuck
    # 900 s, and the seconds the command took to start (11 on a starved machine).
    age = re.match(r"unhealthy: the pipeline's last batch was committed (\d+) s ago \(more than 600 s\)", stuck.stderr)
    assert age and int(age.group(1)) >= 900, stuck


def test_the_command_exits_1_in_one_line_when_nothing_answers():
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    down = healthcheck("--port", str(port), "--timeout", "2")
    assert down.returncode == 1 and down.stderr.count("\n") == 1 and "Traceback" not in down.stderr, down
    assert f"nothing answers at http://127.0.0.1:{port}/metrics" in down.stderr


@pytest.mark.parametrize("bad", [["--port", "0"], ["--port", "x"], ["--max-batch-age", "0"]])
def test_bad_flags_are_one_usage_line(bad):
    result = healthcheck(*bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result


def test_a_path_other_than_metrics_is_health_when_it_answers(pipeline_endpoint):
    import time

    PIPELINE_LAST_BATCH_TIME.set(time.time() - 900)  # judged on /metrics only
    answered = healthcheck("--port", str(pipeline_endpoint), "--path", "/healthz")
    assert answered.returncode == 0, answered
    assert healthcheck("--port", str(pipeline_endpoint), "--path", "healthz").returncode == 2
