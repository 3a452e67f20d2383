"""`reassigner run` on SIGTERM with real Kafka, Redis and Spark: exit 0, no traceback in its log,
and no process of it left (Spark's JVM, in a session of its own, included), whether the signal
comes while Spark starts, once the query runs to the run's process group (as a terminal or a
supervisor sends it), to that group and Spark's JVM at once (as systemd's default
`KillMode=control-group` does), or to Spark's JVM alone; and a SIGKILL to the driver leaves no
JVM behind. The startup case without any service is in tests/test_cli_usage.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.long]


def start_run(local_stack, redis_url: str, tmp_path: Path, cache_dir) -> tuple[subprocess.Popen, Path, str]:
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
    return process, log_file, prefix


def wait_for(log_file: Path, text: str, timeout: float) -> None:
    eventually(lambda: text in log_file.read_text(errors="replace"), timeout, 0.5,
               what=f"{text!r} in the run's log ({log_file})")


def spark_jvm(process: subprocess.Popen) -> int | None:
    """The pid of the run's Spark JVM (pyspark starts it as a child of the driver), or None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == process.pid and b"java" in command:
            return int(entry.name)
    return None


def batches_committed(redis_url: str, cluster_name: str) -> int:
    """The micro-batches (its Ticks) the run has committed to its state."""
    import redis

    from state.controller_store import ControllerStore

    client = redis.Redis.from_url(redis_url)
    try:
        return ControllerStore(client, cluster_name).last_batch() + 1
    finally:
        client.close()


def running_with_batches(local_stack, redis_url, tmp_path, cache_dir) -> tuple[subprocess.Popen, Path]:
    """A run whose query has committed a few micro-batches."""
    process, log_file, cluster_name = start_run(local_stack, redis_url, tmp_path, cache_dir)
    try:
        wait_for(log_file, "pipeline running", 300)
        eventually(lambda: batches_committed(redis_url, cluster_name) >= 3, 60, 0.5,
                   what="a few micro-batches committed (Ticks)")
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return process, log_file


def stop_and_check(process: subprocess.Popen, log_file: Path, send, errors_allowed: bool = True) -> str:
    """`send` the stop: the run must exit 0 with no traceback in its log (nor an ERROR line unless
    `errors_allowed`) and leave no process."""
    jvm = spark_jvm(process)
    try:
        send()
        code = process.wait(120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    said = log_file.read_text(errors="replace")
    noisy = [line for line in said.splitlines()
             if "Traceback" in line or (" ERROR " in line and not errors_allowed)]
    assert code == 0 and not noisy, said[-3000:]
    check_nothing_left(process, jvm)
    return said


def check_nothing_left(process: subprocess.Popen, jvm: int | None) -> None:
    """Every process of the run gone: its group, and Spark's JVM (and what it forked), which runs
    in a session of its own. Regression: leaving in the middle of pyspark's launch left Spark's
    JVM running for good."""
    try:
        eventually(lambda: not process_group_alive(process.pid)
                   and (jvm is None or not process_group_alive(jvm)), 60, 0.5,
                   what="every process of the stopped run gone (Spark's JVM too)")
    finally:
        for group in (process.pid, jvm):
            if group is not None and process_group_alive(group):
                os.killpg(group, signal.SIGKILL)


def session_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def test_sigterm_to_the_whole_group_while_the_query_runs(local_stack, redis_url, tmp_path, cache_dir):
    """As a terminal or a supervisor sends it: the driver alone gets it (Spark's JVM, in a session
    of its own, and the `chmod` Hadoop forks for each checkpoint file do not: a killed `chmod`
    made Spark log "terminated with error"), and stops the query, then Spark."""
    process, log_file = running_with_batches(local_stack, redis_url, tmp_path, cache_dir)
    jvm = spark_jvm(process)
    assert jvm is not None and session_of(jvm) == jvm != session_of(process.pid)
    stop_and_check(process, log_file, lambda: os.killpg(process.pid, signal.SIGTERM), errors_allowed=False)


def test_sigterm_to_the_group_and_the_jvm_at_once(local_stack, redis_url, tmp_path, cache_dir):
    """As systemd's default `KillMode=control-group` sends it: the JVM's shutdown hook stops the
    query before Spark stops its context under a batch (a py4j traceback in the log, seen under
    load). A `chmod` of Hadoop's in flight gets the signal too, so an ERROR line is possible here
    (`KillMode=mixed` avoids it: docs/operations.md)."""
    process, log_file = running_with_batches(local_stack, redis_url, tmp_path, cache_dir)
    jvm = spark_jvm(process)
    assert jvm is not None, "no Spark JVM among the run's children"

    def control_group_stop() -> None:
        os.killpg(process.pid, signal.SIGTERM)
        os.kill(jvm, signal.SIGTERM)

    stop_and_check(process, log_file, control_group_stop)


def test_sigkill_to_the_driver_leaves_no_jvm(local_stack, redis_url, tmp_path, cache_dir):
    """Spark's JVM, outside the driver's group, exits when its stdin (a pipe from the driver)
    closes."""
    process, _ = running_with_batches(local_stack, redis_url, tmp_path, cache_dir)
    jvm = spark_jvm(process)
    assert jvm is not None, "no Spark JVM among the run's children"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    check_nothing_left(process, jvm)


def test_sigterm_to_the_spark_jvm_alone_stops_the_run(local_stack, redis_url, tmp_path, cache_dir):
    process, log_file = running_with_batches(local_stack, redis_url, tmp_path, cache_dir)
    jvm = spark_jvm(process)
    assert jvm is not None, "no Spark JVM among the run's children"
    said = stop_and_check(process, log_file, lambda: os.kill(jvm, signal.SIGTERM))
    assert "stopping on SIGTERM" in said, said[-3000:]


def test_sigterm_while_spark_starts(local_stack, redis_url, tmp_path, cache_dir):
    process, log_file, _ = start_run(local_stack, redis_url, tmp_path, cache_dir)
    try:
        eventually(lambda: spark_jvm(process), 120, 0.1, what="Spark's JVM being launched")
        assert process.poll() is None and "pipeline running" not in log_file.read_text(errors="replace")
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    said = stop_and_check(process, log_file, lambda: process.send_signal(signal.SIGTERM))
    assert "stopped on SIGTERM" in said, said[-3000:]


def process_group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
