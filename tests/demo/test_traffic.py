"""The no-data-loss accounting: what was produced, acknowledged and read back."""

from reassigner.dev.harness.traffic import TrafficReport, compare_sequences

ORDERS_0 = ("orders", 0)


def test_a_complete_ordered_log_is_clean():
    check = compare_sequences({ORDERS_0: 3}, {ORDERS_0: {0: 0, 1: 1, 2: 2}}, {ORDERS_0: [0, 1, 2]})
    assert (check.read, check.lost, check.unacknowledged, check.out_of_order, check.duplicated) == (
        3, 0, 0, 0, 0)
    assert check.missing == []


def test_an_acknowledged_record_missing_is_lost_and_named_with_its_offset():
    check = compare_sequences({ORDERS_0: 3}, {ORDERS_0: {0: 0, 1: 1, 2: 2}}, {ORDERS_0: [0, 2]})
    assert (check.lost, check.unacknowledged) == (1, 0)
    assert check.missing == ["orders-0 #1 (acknowledged at offset 1)"]


def test_a_record_never_acknowledged_and_absent_is_a_failed_write_not_a_loss():
    check = compare_sequences({ORDERS_0: 3}, {ORDERS_0: {0: 0, 1: 1}}, {ORDERS_0: [0, 1]})
    assert (check.lost, check.unacknowledged) == (0, 1)
    assert check.missing == ["orders-0 #2 (never acknowledged)"]


def test_an_unacknowledged_record_that_was_written_after_all_is_not_missing():
    check = compare_sequences({ORDERS_0: 2}, {ORDERS_0: {0: 0}}, {ORDERS_0: [0, 1]})
    assert (check.lost, check.unacknowledged, check.missing) == (0, 0, [])


def test_duplicates_and_reordering_are_counted_per_partition():
    check = compare_sequences({ORDERS_0: 3, ("audit", 1): 2},
                              {ORDERS_0: {0: 0, 1: 2, 2: 1}, ("audit", 1): {0: 0, 1: 1}},
                              {ORDERS_0: [0, 2, 1], ("audit", 1): [0, 1, 1]})
    assert (check.out_of_order, check.duplicated, check.read) == (1, 1, 6)


def test_only_the_first_few_missing_records_are_described():
    check = compare_sequences({ORDERS_0: 10}, {ORDERS_0: {}}, {ORDERS_0: []}, describe=2)
    assert check.unacknowledged == 10 and len(check.missing) == 2


def test_the_report_fails_on_an_unacknowledged_write_and_says_why():
    report = TrafficReport(produced=3, acknowledged=2, read=2, unacknowledged=1,
                           missing=["orders-0 #2 (never acknowledged)"])
    assert not report.clean
    assert "1 never acknowledged" in report.problems() and "orders-0 #2" in report.problems()
    assert TrafficReport(produced=1, acknowledged=1, read=1).clean


def test_the_partitions_missing_a_record_are_named_for_the_evidence():
    check = compare_sequences({ORDERS_0: 3, ("audit", 3): 2, ("audit", 1): 1},
                              {ORDERS_0: {}, ("audit", 3): {1: 0}, ("audit", 1): {0: 0}},
                              {ORDERS_0: [0, 1, 2], ("audit", 3): [1], ("audit", 1): []})
    assert check.missing_partitions == (("audit", 1), ("audit", 3))
    assert check.missing == ["audit-1 #0 (acknowledged at offset 0)", "audit-3 #0 (never acknowledged)"]
