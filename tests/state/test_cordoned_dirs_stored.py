"""A dir's cordon (`LogDir.cordoned`) is kept in the stored broker row, as a trailing entry that
readers of the previous version ignore, and a row stored before cordons loads as none cordoned.
Pure: the stored forms, no Redis."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, TopicPartition
from state.model import ControllerState
from state.stored_forms import broker_from_storage, broker_to_storage, compute_changes

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)

dirs = st.lists(st.builds(LogDir, st.sampled_from(["/a", "/b", "/c"]), st.booleans(), st.none() | st.integers(0, 10),
                          st.none() | st.integers(0, 10), st.none() | st.integers(0, 10), st.none() | st.integers(0, 3),
                          st.sampled_from([frozenset(), frozenset({TP})]),
                          st.sampled_from([(), ((TP, 5),)]), st.booleans()),
                max_size=3, unique_by=lambda d: d.path)


@settings(max_examples=200, deadline=None)
@given(dirs, st.sampled_from([frozenset(), frozenset({TP})]), st.booleans(), st.booleans())
def test_a_broker_loads_as_it_was_stored_cordons_included(log_dirs, cannot_host, alive, draining):
    broker = Broker(4, "/r1", alive, draining, tuple(log_dirs), cannot_host)
    loaded, observed = broker_from_storage(4, broker_to_storage(broker, T0))
    assert loaded == broker and observed == T0
    assert [d.copying_bytes for d in loaded.log_dirs] == [d.copying_bytes for d in broker.log_dirs]


def test_a_broker_stored_before_cordons_loads_uncordoned_and_one_without_any_is_stored_as_before():
    plain = Broker(1, log_dirs=(LogDir("/a", replica_bytes=5, replica_count=1),))
    stored = broker_to_storage(plain, T0)
    assert len(json.loads(stored)) == 5  # nothing cordoned: the row of the previous version
    assert broker_from_storage(1, stored)[0] == plain
    older = json.dumps([None, True, False, [["/a", True, None, None, 5, 1, []]], T0])
    assert not broker_from_storage(1, older)[0].log_dirs[0].cordoned


def test_a_reader_of_the_previous_version_reads_a_broker_with_a_cordoned_dir():
    """Rolling upgrade: the cordoned dirs are the broker's eighth entry, after the ones the
    previous version reads (observed at, cannot host, copies in flight); its dir rows are as
    before (it unpacked each into exactly seven entries)."""
    broker = Broker(1, log_dirs=(LogDir("/a", cordoned=True), LogDir("/b")))
    rack, alive, draining, rows, *rest = json.loads(broker_to_storage(broker, T0))
    for row in rows:
        path, online, total, usable, replica_bytes, replica_count, futures = row
    assert rest == [T0, [], {}, ["/a"]]


def test_a_cordon_that_changed_alone_is_written():
    before = ControllerState(cluster=Cluster((Broker(1, log_dirs=(LogDir("/a"), LogDir("/b"))),)))
    after = before.with_cluster(Cluster((Broker(1, log_dirs=(LogDir("/a", cordoned=True), LogDir("/b"))),)))
    written = compute_changes(before, after)["brokers"]
    assert written["del"] == [] and written["set"][0] == "1"
    assert broker_from_storage(1, written["set"][1])[0].log_dirs[0].cordoned
