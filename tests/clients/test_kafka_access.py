"""The start-up access check's pure part: which ACL operations a process lacks, and the grant
that closes each gap (`runtime.clients.kafka_access`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.clients.kafka_access import PROCESS_NEEDS, AccessGap, compute_access_gaps

OPERATIONS = ["READ", "WRITE", "CREATE", "DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
operation_sets = st.frozensets(st.sampled_from(OPERATIONS))


@given(process=st.sampled_from(sorted(PROCESS_NEEDS)), cluster=st.none() | operation_sets,
       own=st.dictionaries(st.sampled_from(["reassigner.a", "reassigner.b"]), st.none() | operation_sets),
       user=st.dictionaries(st.sampled_from(["orders", "payments"]), st.none() | operation_sets))
def test_a_gap_is_reported_exactly_when_an_answer_lacks_a_needed_operation(process, cluster, own, user):
    needs = PROCESS_NEEDS[process]
    gaps = {gap.resource: set(gap.operations) for gap in compute_access_gaps(needs, cluster, own, user, "reassigner")}
    expected = {}
    if cluster is not None and needs.cluster - cluster:
        expected["cluster"] = set(needs.cluster - cluster)
    for resource, needed, answers in (("reassigner", needs.own_topics, own), ("*", needs.user_topics, user)):
        missing = set().union(*[needed - ops for ops in answers.values() if ops is not None])
        if missing:
            expected[resource] = missing
    assert gaps == expected


def test_everything_granted_means_no_gap():
    every = frozenset(OPERATIONS)
    for needs in PROCESS_NEEDS.values():
        assert compute_access_gaps(needs, every, {"reassigner.commands": every}, {"orders": every},
                                   "reassigner") == []


def test_the_grant_is_a_kafka_acls_command_for_the_right_resource():
    assert AccessGap("cluster", ("ALTER", "ALTER_CONFIGS")).render_grant("User:r", "reassigner") == (
        "kafka-acls.sh --add --allow-principal User:r --operation Alter --operation AlterConfigs --cluster")
    assert AccessGap("reassigner", ("READ",)).render_grant("User:r", "reassigner").endswith(
        "--operation Read --topic reassigner. --resource-pattern-type prefixed")
    assert AccessGap("*", ("DESCRIBE",)).render_grant("User:r", "reassigner").endswith("--topic '*'")
    assert AccessGap("cluster", ("DESCRIBE_CONFIGS",)).describe("reassigner") == "DescribeConfigs on the cluster"
