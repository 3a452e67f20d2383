"""Exactly-once by offsets, the pure rules (`streams.offsets`)."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from streams.offsets import (compute_advanced, compute_checkpoint_gap, compute_consumed,
                             compute_starting_offsets, compute_truncated, compute_unapplied,
                             read_checkpoint_positions)

records = st.lists(st.tuples(st.sampled_from(["r", "e"]), st.integers(0, 2), st.integers(0, 50)),
                   max_size=40)
applied_maps = st.dictionaries(st.tuples(st.sampled_from(["r", "e"]), st.integers(0, 2)),
                               st.integers(-1, 50), max_size=6)


@given(records, applied_maps)
def test_a_record_is_applied_once_however_batches_overlap(rows, applied):
    """Whatever was applied before, a batch applies exactly its records above the applied offset,
    and after it every one of its records counts as applied (a replay of it applies nothing)."""
    fresh = compute_unapplied(rows, applied)
    assert fresh == [r for r in rows if r[2] > applied.get(r[:2], -1)]
    after = {**applied, **compute_advanced(applied, compute_consumed(rows))}
    assert compute_unapplied(rows, after) == []
    assert all(after[key] >= offset for key, offset in applied.items())


def test_collapsed_and_undecodable_records_count_as_consumed():
    consumed = compute_consumed([("r", 0, 3), ("r", 0, 9), ("e", 1, 4), ("r", 0, 5)])
    assert consumed == {("r", 0): 9, ("e", 1): 4}
    assert compute_advanced({("r", 0): 9, ("e", 1): 2}, consumed) == {("e", 1): 4}


def test_starting_offsets_name_every_partition():
    starts = json.loads(compute_starting_offsets({"r": [0, 1], "e": [0]}, {("r", 1): 41}))
    assert starts == {"r": {"0": -2, "1": 42}, "e": {"0": -2}}


def test_a_recreated_or_truncated_partition_is_read_again():
    applied = {("r", 0): 99, ("r", 1): 5, ("e", 0): 7}
    assert compute_truncated(applied, {("r", 0): 100, ("r", 1): 5, ("e", 0): 3}) == [("e", 0), ("r", 1)]


def test_a_checkpoint_ahead_of_the_applied_offsets_is_a_gap():
    applied = {("r", 0): 99, ("r", 1): 5}
    positions = {("r", 0): 100, ("r", 1): 9, ("r", 2): 0, ("e", 0): 30}
    assert compute_checkpoint_gap(positions, applied) == [("e", 0), ("r", 1)]
    # records before the log start are gone anyway: not a gap
    assert compute_checkpoint_gap(positions, applied, {("e", 0): 30, ("r", 1): 9}) == []


def test_reading_a_spark_checkpoint(tmp_path):
    assert read_checkpoint_positions(tmp_path) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, ends in ((0, {"r": {"0": 3}}), (1, {"r": {"0": 8, "1": 2}}), (2, {"r": {"0": 12, "1": 2}})):
        (tmp_path / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps(ends) + "\n")
    for batch in (0, 1):  # batch 2 planned but not committed: Spark re-runs it from batch 1's ends
        (tmp_path / "commits" / str(batch)).write_text("v1\n{}\n")
    assert read_checkpoint_positions(tmp_path) == {("r", 0): 8, ("r", 1): 2}
    (tmp_path / "offsets" / "1").write_text("garbage")
    assert read_checkpoint_positions(tmp_path) is None
