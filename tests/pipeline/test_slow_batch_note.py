"""A batch that takes longer than `SLOW_BATCH_SECONDS` is logged at WARNING with its phases,
longest first (`streams.runner.compute_slow_batch_note`): a pipeline that stops answering for
minutes (two scenario runs in CI, 2026-11-28, logged nothing) says where its time went."""

from __future__ import annotations

from streams.runner import SLOW_BATCH_SECONDS, compute_slow_batch_note


def test_a_batch_within_the_limit_says_nothing():
    assert compute_slow_batch_note(7, 3, SLOW_BATCH_SECONDS, {"decide": 9.0}) is None


def test_a_slow_batch_names_its_phases_longest_first():
    note = compute_slow_batch_note(42, 120, 31.25, {"spark": 0.5, "decide": 29.0, "persist": 1.2})
    assert note == ("batch 42 took 31.2 s (120 rows; decide 29.0 s, persist 1.2 s, spark 0.5 s): "
                    "requests and events wait behind it")
