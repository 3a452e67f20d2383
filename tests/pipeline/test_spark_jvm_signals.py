"""Spark's JVM, and every process it forks, ignores SIGTERM (and SIGINT, as pyspark makes it):
only the driver decides when it stops (`streams.spark_session`, module doc). Regression: a
SIGTERM to the pipeline's whole process group (a fault test in CI) killed a `chmod` that Hadoop's
local file system had forked for a checkpoint file, and Spark logged the stop as "Query
terminated with error" with a stack trace. Read from /proc, on the real session."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]


def ignored_signals(status: str) -> set[int]:
    """The signals a /proc/PID/status text says are ignored (its `SigIgn` bit mask)."""
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


def spark_jvm_of_this_process() -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"java" in command and b"pyspark-shell" in command:
            return int(entry.name)
    raise AssertionError("no Spark JVM among this process's children")


def test_the_jvm_and_what_it_forks_ignore_sigterm_and_sigint(spark):
    jvm = spark_jvm_of_this_process()
    assert {signal.SIGTERM, signal.SIGINT} <= ignored_signals(Path(f"/proc/{jvm}/status").read_text())
    # A process forked the way Hadoop forks `chmod` for every checkpoint file it writes.
    gateway = spark.sparkContext._gateway
    command = gateway.new_array(gateway.jvm.java.lang.String, 3)
    command[0], command[1], command[2] = "sh", "-c", "cat /proc/self/status"
    forked = gateway.jvm.org.apache.hadoop.util.Shell.execCommand(command)
    assert {signal.SIGTERM, signal.SIGINT} <= ignored_signals(forked)


def test_the_driver_keeps_its_own_sigterm_handler(spark):
    """The launch changed the child's disposition only: the driver still hears SIGTERM."""
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
