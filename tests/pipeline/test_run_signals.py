"""`reassigner run` on SIGTERM with real Kafka, Redis and Spark (issue 19 item 5: tracebacks on
SIGTERM): exit 0 and no traceback whether the signal comes while Spark starts, or once the query
runs and to the whole process group (Spark's JVM gets it too, as under systemd's or a terminal's
group signals). The startup case without any service is in tests/test_cli_usage.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow]


def start_run(local_stack, redis_url: str, tmp_path: Path, cache_dir) -> tuple[subprocess.Popen, Path]:
    prefix = f"s{uuid.uuid4().hex[:8]}"
    environment = {**os.environ, "REASSIGNER_BOOTSTRAP_SERVERS": local_stack.bootstrap_servers,
                   "REASSIGNER_REDIS_URL": redis_url, "REASSIGNER_TOPIC_PREFIX": prefix,
                   "REASSIGNER_CLUSTER_NAME": prefix, "REASSIGNER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                   "REASSIGNER_CACHE_DIR": str(cache_dir), "PYSPARK_PYTHON": sys.executable}
    log_file = tmp_path / "run.log"
    with open(log_file, "ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "reassigner.cli", "run", "--verbose"], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment,
                                   start_new_session=True)
    return process, log_file


def wait_for(log_file: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log_file.read_text(errors="replace"):
            return
        time.sleep(0.5)
    pytest.fail(f"no {text!r} within {timeout} s:\n{log_file.read_text(errors='replace')[-3000:]}")


def test_sigterm_to_the_whole_group_while_the_query_runs(local_stack, redis_url, tmp_path, cache_dir):
    process, log_file = start_run(local_stack, redis_url, tmp_path, cache_dir)
    try:
        wait_for(log_file, "pipeline running", 300)
        time.sleep(5)  # a few micro-batches (Ticks)
        os.killpg(process.pid, signal.SIGTERM)
        code = process.wait(120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    said = log_file.read_text(errors="replace")
    assert code == 0 and "Traceback" not in said, said[-3000:]


def test_sigterm_while_spark_starts(local_stack, redis_url, tmp_path, cache_dir):
    process, log_file = start_run(local_stack, redis_url, tmp_path, cache_dir)
    try:
        time.sleep(3)  # Redis checked, topics made: the Spark session is being built
        assert process.poll() is None and "pipeline running" not in log_file.read_text(errors="replace")
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    said = log_file.read_text(errors="replace")
    assert code == 0 and "Traceback" not in said and "stopped on SIGTERM" in said, said[-3000:]
    # Regression: leaving in the middle of pyspark's launch left Spark's JVM running for good.
    try:
        eventually(lambda: not process_group_alive(process.pid), 60, 0.5,
                   what="every process of the stopped run gone (Spark's JVM too)")
    finally:
        if process_group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)


def process_group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
