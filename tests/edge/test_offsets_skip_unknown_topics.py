"""Reading the partitions' offsets for a traffic sample leaves out the topics a leader does not
know yet (`runtime.clients.kafka_admin.read_skipping_unknown`), not the whole sample. Each broker
learns of a topic on its own: on Kafka 3.7 the watcher's own topics, created moments before,
were shown by the metadata yet unknown to their leader, and the last traffic sample of
tests/edge/test_traffic_on_a_real_cluster.py had no rates (CI-equivalent, 2026-11-29). The rule
is tested here with a reader that refuses some topics as Kafka does; the real read is
tests/edge/test_traffic_on_a_real_cluster.py's."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from kafka.structs import TopicPartition

from runtime.clients.kafka_admin import read_skipping_unknown
from schemas.errors import UnknownTopicOrPartitionError


def reader(unknown: set[str], calls: list):
    def read(wanted: list) -> dict:
        calls.append(len(wanted))
        if any(tp.topic in unknown for tp in wanted):
            raise UnknownTopicOrPartitionError("list the partitions' log end offsets: UNKNOWN_TOPIC_OR_PARTITION")
        return {(tp.topic, tp.partition): (0, tp.partition) for tp in wanted}
    return read


@settings(max_examples=100, deadline=None)
@given(topics=st.integers(1, 60), partitions=st.integers(1, 4), data=st.data())
def test_every_known_topic_is_read_and_only_the_unknown_ones_are_left_out(topics, partitions, data):
    names = [f"t{i}" for i in range(topics)]
    unknown = set(data.draw(st.lists(st.sampled_from(names), max_size=3)))
    wanted = [TopicPartition(t, p) for t in names for p in range(partitions)]
    calls: list = []
    read = read_skipping_unknown(reader(unknown, calls), wanted)
    assert read == {(tp.topic, tp.partition): (0, tp.partition) for tp in wanted if tp.topic not in unknown}
    if not unknown:
        assert calls == [len(wanted)], "one read when every topic is known"
    else:  # halving: about 2 log2(n) reads per unknown topic
        assert len(calls) <= 1 + 2 * len(unknown) * max(1, topics.bit_length()), (len(calls), topics, unknown)


def test_nothing_wanted_reads_nothing():
    calls: list = []
    assert read_skipping_unknown(reader(set(), calls), []) == {} and calls == []
