"""The one DeadLetter builder: bad bytes kept as they came, and never a record Kafka would refuse
(regression: 1,040,000 bytes of garbage on an input topic became an outbox message over the
producer's limit, and the pipeline crash-looped re-publishing it)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from schemas.codec import decode, encode
from schemas.dead_letter import MAX_VALUE_BYTES, build_dead_letter

KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def test_a_small_bad_message_is_kept_byte_for_byte():
    letter = build_dead_letter(source_topic="r.isr-changes", partition=2, offset=41, value=b"\x00garbage",
                               key=b"k", headers={"schema_version": b"1"}, reason="not a PartitionState",
                               now_ms=5, expected_schema="PartitionState")
    decoded = decode("DeadLetter", encode("DeadLetter", letter))
    assert (decoded["id"], decoded["value"], decoded["source_key"], decoded["reason"]) == (
        "r.isr-changes-2-41", b"\x00garbage", b"k", "not a PartitionState")


def test_a_megabyte_of_garbage_is_cut_and_says_where_the_whole_record_is():
    letter = build_dead_letter(source_topic="r.requests", partition=0, offset=7, value=b"\xff" * 1_040_000,
                               reason="not a Request", now_ms=5)
    assert len(letter["value"]) == MAX_VALUE_BYTES
    assert "value cut from 1,040,000" in letter["reason"] and "r.requests[0]@7" in letter["reason"]
    assert len(encode("DeadLetter", letter)) < KAFKA_DEFAULT_MAX_MESSAGE_BYTES


@given(value=st.binary(max_size=2_000_000), key=st.none() | st.binary(max_size=100_000),
       headers=st.dictionaries(st.text(max_size=50), st.binary(max_size=40_000), max_size=5),
       reason=st.text(max_size=20_000))
def test_every_dead_letter_fits_a_kafka_message(value, key, headers, reason):
    letter = build_dead_letter(source_topic="t", partition=0, offset=1, value=value, key=key,
                               headers=headers, reason=reason, now_ms=1)
    assert len(encode("DeadLetter", letter)) < KAFKA_DEFAULT_MAX_MESSAGE_BYTES
