"""Sizes and durations read the same on every screen: `format_size` / `format_duration` for the
terminal and `reassigner simulate`, and the status page's script, which gets the same rule as
`UNITS_JS` (run here in node, when node is installed)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from reassigner.operator.views.units import UNITS_JS, format_duration, format_rate, format_size

SIZES = [None, 0, 1, 999, 1000, 1049, 28_100_000, 125_829_120, 157_286_400, 999_949_999, 2 * 10**12, 5 * 10**15]
DURATIONS = [None, 0, 1.4, 59, 60, 61, 206, 3599, 3600, 7500, 176_664]


def test_sizes_count_in_decimal_units_with_one_decimal_above_bytes():
    assert [format_size(v) for v in (None, 0, 999, 1000, 28_100_000, 157_286_400, 2 * 10**12, 5 * 10**15)] == [
        "?", "0 B", "999 B", "1.0 KB", "28.1 MB", "157.3 MB", "2.0 TB", "5,000.0 TB"]
    assert format_rate(2_097_152) == "2.1 MB/s" and format_rate(None) == "?"


def test_durations_round_to_the_second_with_the_smaller_unit_on_two_digits():
    assert [format_duration(v) for v in (None, 0, 42, 60, 206, 3599, 3600, 7500)] == [
        "?", "0 s", "42 s", "1 min 00 s", "3 min 26 s", "59 min 59 s", "1 h 00 min", "2 h 05 min"]


def test_the_status_pages_script_formats_as_python_does():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (UNITS_JS + f"\nconsole.log(JSON.stringify([{json.dumps(SIZES)}.map(size), "
              f"{json.dumps(DURATIONS)}.map(duration)]));")
    result = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    sizes, durations = json.loads(result.stdout)
    assert sizes == [format_size(v) for v in SIZES]
    assert durations == [format_duration(v) for v in DURATIONS]
