"""The driver's collapse of a batch's rows (`streams.input_rows`), the pure rules."""

from __future__ import annotations

from harness import T0, partition_event
from runtime.settings import load_settings
from schemas.codec import TOPICS, encode
from streams.input_rows import InputRow, compute_batch_inputs

SETTINGS = load_settings(topic_prefix="rows")
ISR = SETTINGS.topic("isr-changes")


def isr_row(offset: int, replicas: list[int], partition: int = 0) -> InputRow:
    event = partition_event("orders", partition, replicas, T0 + offset)
    return InputRow(ISR, 0, offset, encode(TOPICS["isr-changes"], event), None, f"orders-{partition}".encode())


def kept_offsets(rows: list[InputRow]) -> list[int]:
    inputs = compute_batch_inputs(0, rows, SETTINGS)
    return [origin.offset for key, origin in sorted(inputs.origins.items()) if key[0] == "events"]


def test_state_events_collapse_to_the_latest_per_subject():
    assert kept_offsets([isr_row(0, [1, 2, 3]), isr_row(1, [1, 2, 4]), isr_row(2, [1, 2, 5])]) == [2]


def test_an_implausible_event_is_neither_superseded_nor_superseding():
    """Regression (CI, 2026-11-26): a forged PartitionState of 10,000 replicas, followed in the
    same micro-batch by the watcher's true state of that partition, was collapsed away and never
    reported; it must reach the handlers (a BadEvent), and the true state too."""
    forged = isr_row(1, list(range(10_000)))
    assert kept_offsets([isr_row(0, [1, 2, 3]), forged, isr_row(2, [1, 2, 4])]) == [1, 2]
    # The forged one last: the true state before it is still the latest plausible one.
    assert kept_offsets([isr_row(0, [1, 2, 3]), isr_row(2, [1, 2, 4]), isr_row(3, [-1, 2, 3])]) == [2, 3]
