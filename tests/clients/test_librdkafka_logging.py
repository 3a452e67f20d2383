"""librdkafka's own log lines go through the product's logging (regression: they were written
raw to stderr by librdkafka's threads, `%3|1700000000.123|FAIL|rdkafka#consumer-1| ...`, in no
format of the product's and past its redaction). No Kafka is started: a consumer of a port
nothing listens on makes librdkafka log its failed connections."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from runtime.clients.kafka_producer import RepeatedLineFilter

REPO = Path(__file__).resolve().parents[2]
PRODUCT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (ERROR|WARNING|INFO) librdkafka: ")

SCRIPT = """
import sys, time
from reassigner.cli.options import configure_logging
from runtime.clients.kafka_consumer import TopicReader

configure_logging(verbose=False)
reader = TopicReader(sys.argv[1], None, "log-test")
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    reader.poll(0.2)  # librdkafka's lines are served by poll
reader.close()
"""


def test_a_librdkafka_log_line_is_in_the_product_format_and_said_once():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = subprocess.run([sys.executable, "-c", SCRIPT, f"127.0.0.1:{port}"], capture_output=True, text=True,
                            timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    refused = [line for line in lines if f"127.0.0.1:{port}" in line and "Connection refused" in line]
    assert refused, result.stderr  # librdkafka did log, every ~50-1000 ms for 3 s
    assert all(PRODUCT_LINE.match(line) for line in lines), result.stderr  # nothing raw (%3|...|FAIL|...)
    assert len(refused) == 1, result.stderr  # a repeat within a minute is held back


def make_record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("librdkafka", level, __file__, 1, "%s [%s] %s",
                             ("FAIL", "rdkafka#consumer-1", message), None)


def test_repeated_lines_are_counted_and_said_again_after_the_window():
    now = [0.0]
    repeats = RepeatedLineFilter(window_seconds=60, clock=lambda: now[0])
    refused = "b:9/bootstrap: Connect to ipv4#b:9 failed: Connection refused (after {}ms in state CONNECT)"
    assert repeats.filter(make_record(refused.format(0)))
    for step in range(1, 5):
        now[0] = step * 10.0
        assert not repeats.filter(make_record(refused.format(step)))
    assert repeats.filter(make_record("another broker: Connect to ipv4#c:9 failed: Connection refused"))
    assert repeats.filter(make_record("SSL handshake failed"))
    assert repeats.filter(make_record("SSL handshake failed", logging.WARNING))  # another level: another line
    now[0] = 61.0
    again = make_record(refused.format(7))
    assert repeats.filter(again) and again.getMessage().endswith("(4 more like it in the last 61 s)")
    now[0] = 62.0
    assert not repeats.filter(make_record(refused.format(8)))


def test_a_broker_that_cannot_be_reached_is_a_warning_and_its_suppressed_count_is_no_new_line():
    """A dead broker (its group coordinator, at a clean stop) put ERROR lines in the log: an
    outage the product rides out is a WARNING; librdkafka's own "(..., 1 identical error(s)
    suppressed)" suffix makes no new line."""
    repeats = RepeatedLineFilter(window_seconds=60, clock=lambda: 0.0)
    first = make_record("GroupCoordinator: b:9: Connect to ipv4#b:9 failed: Connection refused "
                        "(after 0ms in state CONNECT)")
    assert repeats.filter(first) and first.levelno == logging.WARNING and first.levelname == "WARNING"
    assert not repeats.filter(make_record("GroupCoordinator: b:9: Connect to ipv4#b:9 failed: Connection refused "
                                          "(after 0ms in state CONNECT, 1 identical error(s) suppressed)"))
    other = make_record("Topic t: partition 0: offset out of range")
    assert repeats.filter(other) and other.levelno == logging.ERROR
