"""The real local cluster names its own Kafka (runtime/kafka_versions.py through the admin door):
the release the local stack runs (`local_kafka_version`, the CI matrix's
REASSIGNER_LOCAL_KAFKA_VERSION), formatted new at that release's newest metadata.version, with
what that release gives."""

from __future__ import annotations

import pytest

from runtime.clients.kafka_admin import ClusterAdmin
from runtime.kafka_versions import ELR_FEATURE, METADATA_VERSION, assess_cluster

pytestmark = [pytest.mark.stack]


def test_the_local_cluster_is_named_by_the_release_it_runs_and_has_what_that_release_gives(local_stack):
    with ClusterAdmin(local_stack.bootstrap_servers) as admin:
        features = admin.describe_kafka()
    support = assess_cluster(features)
    release = ".".join(local_stack.kafka_version.split(".")[:2])  # "4.1" for 4.1.1
    assert support.refusal is None
    assert support.release in (release, f"{release} or later"), (support, features)
    assert "log-dir moves and dir failures" in support.has
    major, minor = (int(part) for part in release.split("."))
    if (major, minor) >= (4, 0):
        assert "fenced brokers in DescribeCluster" in support.has
    if (major, minor) >= (4, 1):  # a new cluster: ELR finalized on
        assert features.finalized.get(ELR_FEATURE) == 1
        assert "eligible leader replicas" in support.has
    assert ("cordoned log dirs" in support.has) == ((major, minor) >= (4, 3))
    assert features.finalized[METADATA_VERSION] == support.level
    print(support.summary())
