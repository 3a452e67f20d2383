"""Spark's JVM, and every process it forks, runs in a session of its own (`streams.spark_session`,
module doc): a signal to the driver's process group reaches the driver alone. Regression: a
SIGTERM to the pipeline's whole process group (CI's fault test 10) killed a `chmod` Hadoop's local
file system had forked for a checkpoint file, and Spark logged the stop as "Query terminated with
error". Read from /proc, on the real session."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]


def stat_fields(text: str) -> list[str]:
    """/proc/PID/stat's fields after the command name: state, ppid, pgrp, session, ..."""
    return text.rsplit(")", 1)[1].split()


def spark_jvm_of_this_process() -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(stat_fields((entry / "stat").read_text())[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"java" in command and b"pyspark-shell" in command:
            return int(entry.name)
    raise AssertionError("no Spark JVM among this process's children")


def test_the_jvm_and_what_it_forks_are_outside_the_drivers_group(spark):
    jvm = spark_jvm_of_this_process()
    _, _, group, session = stat_fields(Path(f"/proc/{jvm}/stat").read_text())[:4]
    assert int(group) == int(session) == jvm
    assert os.getpgid(0) != jvm and os.getsid(0) != jvm
    # A process forked the way Hadoop forks `chmod` for every checkpoint file it writes.
    gateway = spark.sparkContext._gateway
    command = gateway.new_array(gateway.jvm.java.lang.String, 3)
    command[0], command[1], command[2] = "sh", "-c", "cat /proc/$$/stat"
    _, parent, group, session = stat_fields(gateway.jvm.org.apache.hadoop.util.Shell.execCommand(command))[:4]
    assert int(parent) == jvm and int(group) == int(session) == jvm


def test_the_signals_are_as_pyspark_leaves_them(spark):
    """The launch changed the child's session only: the driver still hears SIGTERM, and the JVM
    does too (its shutdown hook stops the query: tests/pipeline/test_run_signals.py)."""
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
    status = Path(f"/proc/{spark_jvm_of_this_process()}/status").read_text()
    ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    assert not ignored >> (signal.SIGTERM - 1) & 1
