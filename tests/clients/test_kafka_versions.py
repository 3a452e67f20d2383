"""Which Kafka a cluster runs and what the product does there (runtime/kafka_versions.py), from
the finalized features and request versions each supported release answers."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from runtime.kafka_versions import (CAPABILITIES, DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS, ELR_FEATURE,
                                    METADATA_VERSION, OLDEST_LEVEL, RELEASE_LEVELS, ClusterFeatures,
                                    assess_cluster, compute_release)

# What a cluster of each release answers when formatted at its newest production level: the
# metadata.version level, ELR finalized (on by default for new clusters from 4.1), and the newest
# DescribeCluster (v2 from 4.0: fenced brokers) and DescribeLogDirs (v5 from 4.3: IsCordoned).
NEW_CLUSTERS = {
    "3.7": ClusterFeatures({METADATA_VERSION: 19}, {DESCRIBE_CLUSTER: 1, DESCRIBE_LOG_DIRS: 4}),
    "3.8": ClusterFeatures({METADATA_VERSION: 20}, {DESCRIBE_CLUSTER: 1, DESCRIBE_LOG_DIRS: 4}),
    "3.9": ClusterFeatures({METADATA_VERSION: 21}, {DESCRIBE_CLUSTER: 1, DESCRIBE_LOG_DIRS: 4}),
    "4.0": ClusterFeatures({METADATA_VERSION: 25}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 4}),
    "4.1": ClusterFeatures({METADATA_VERSION: 27, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 4}),
    "4.2": ClusterFeatures({METADATA_VERSION: 29, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 4}),
    "4.3": ClusterFeatures({METADATA_VERSION: 30, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 5}),
    "4.4": ClusterFeatures({METADATA_VERSION: 33, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 5}),
}

EXPECTED_CAPABILITIES = {
    "3.7": 1, "3.8": 1, "3.9": 1, "4.0": 2, "4.1": 3, "4.2": 3, "4.3": 4, "4.4": 4,
}


@pytest.mark.parametrize("release", list(NEW_CLUSTERS))
def test_each_supported_release_is_named_and_warned_of_what_it_lacks_only(release):
    support = assess_cluster(NEW_CLUSTERS[release])
    assert support.refusal is None
    assert support.release == release
    assert len(support.has) == EXPECTED_CAPABILITIES[release]
    assert len(support.warnings) == len(CAPABILITIES) - len(support.has)
    for warning in support.warnings:
        assert "\n" not in warning and warning.startswith(f"Kafka {release} has no ")
    assert support.summary().startswith(f"Kafka {release} (metadata.version level ")


def test_a_cluster_not_yet_upgraded_to_its_binaries_newest_level_runs_as_the_older_release():
    # 4.3 binaries on a cluster left at 4.2-IV1: no cordons (the brokers refuse cordoned.log.dirs).
    support = assess_cluster(ClusterFeatures({METADATA_VERSION: 29, ELR_FEATURE: 1},
                                             {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 5}))
    assert support.release == "4.2"
    assert "cordoned log dirs" not in support.has
    assert any("cordoned log dirs (from 4.3" in w for w in support.warnings)


def test_elr_off_on_a_4_1_cluster_upgraded_from_an_older_one_is_a_warning():
    support = assess_cluster(ClusterFeatures({METADATA_VERSION: 27, ELR_FEATURE: 0}, {DESCRIBE_CLUSTER: 2}))
    assert "eligible leader replicas" not in support.has
    assert any(w.startswith("Kafka 4.1 has no eligible leader replicas") for w in support.warnings)


def test_a_zookeeper_mode_cluster_is_refused_in_one_line():
    support = assess_cluster(ClusterFeatures({}, {DESCRIBE_CLUSTER: 1}))
    assert support.release == "ZooKeeper mode" and support.level is None
    assert support.refusal is not None and "\n" not in support.refusal
    assert "ZooKeeper mode" in support.refusal and "KRaft" in support.refusal
    assert support.summary() == support.refusal


def test_kraft_older_than_3_7_is_refused_and_3_7_iv0_is_not():
    old = assess_cluster(ClusterFeatures({METADATA_VERSION: OLDEST_LEVEL - 1}))
    assert old.refusal is not None and "3.7 or later" in old.refusal and "\n" not in old.refusal
    oldest = assess_cluster(ClusterFeatures({METADATA_VERSION: OLDEST_LEVEL}))
    assert oldest.refusal is None and oldest.release == "3.7"
    assert "log-dir moves and dir failures" not in oldest.has  # JBOD needs 3.7-IV2 (17)


def test_a_level_newer_than_any_known_is_the_newest_release_or_later_never_refused():
    support = assess_cluster(ClusterFeatures({METADATA_VERSION: 34, ELR_FEATURE: 1},  # 4.5-IV0, unreleased
                                             {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 5}))
    assert support.refusal is None
    assert support.release == f"{RELEASE_LEVELS[-1][1]} or later"
    assert len(support.has) == len(CAPABILITIES) and not support.warnings


@given(st.integers(0, 60), st.integers(0, 60))
def test_a_higher_level_never_names_an_older_release(low, high):
    low, high = sorted((low, high))
    releases = ["older than 3.7"] + [name for _, name, _ in RELEASE_LEVELS]

    def rank(level: int) -> int:
        return releases.index(compute_release(level).removesuffix(" or later"))
    assert rank(low) <= rank(high)


@given(st.dictionaries(st.sampled_from([METADATA_VERSION, ELR_FEATURE]), st.integers(0, 40)),
       st.dictionaries(st.sampled_from([DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS]), st.integers(0, 6)))
def test_every_capability_is_either_had_or_warned_of_once(finalized, api_versions):
    support = assess_cluster(ClusterFeatures(finalized, api_versions))
    if support.refusal is not None:
        assert not support.has and not support.warnings
        return
    assert len(support.has) + len(support.warnings) == len(CAPABILITIES)
    for capability in CAPABILITIES:
        warned = [w for w in support.warnings if f" has no {capability.name} " in w]
        assert (capability.name in support.has) != bool(warned)


def test_the_local_stack_runs_a_release_number_from_3_7_on_and_says_why_not_in_one_line():
    import pytest

    from runtime.kafka_versions import DEFAULT_LOCAL_RELEASE, LOCAL_RELEASES, check_local_release
    from runtime.settings import load_settings
    from schemas.errors import InvalidConfigError

    assert DEFAULT_LOCAL_RELEASE in LOCAL_RELEASES
    for release in (*LOCAL_RELEASES, "4.3.1", "10.0.0"):
        assert check_local_release(release) == release
    for bad, why in (("3.6.2", "older than 3.7"), ("4.x", "no Kafka release number"), ("4.1", "expected X.Y.Z"),
                     ("", "expected X.Y.Z"), ("4.1.1; rm -rf /", "no Kafka release number")):
        with pytest.raises(ValueError, match=why):
            check_local_release(bad)
        with pytest.raises(InvalidConfigError, match="local_kafka_version") as error:
            load_settings(local_kafka_version=bad or " ")
        assert "\n" not in str(error.value)
    assert load_settings(local_kafka_version=" 4.4.0 ").local_kafka_version == "4.4.0"


def test_an_api_key_the_client_library_does_not_know_is_read_as_a_number():
    """Regression (Kafka 4.4.0 on the local stack): kafka-python's `api_versions()` maps each key
    to its enum and failed on key 93 ("93 is not a valid ApiKey"), so the watcher stopped at its
    version check on every 4.4 cluster. The product reads the raw answer."""
    import asyncio
    from types import SimpleNamespace

    from kafka.protocol.metadata import ApiVersionsResponse

    from runtime.clients.kafka_fast_reads import read_cluster_features

    answer = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=key, min_version=0, max_version=top)
                  for key, top in ((DESCRIBE_LOG_DIRS, 5), (DESCRIBE_CLUSTER, 2), (93, 0))],
        finalized_features=[ApiVersionsResponse.FinalizedFeatureKey(name=METADATA_VERSION, min_version_level=1,
                                                                    max_version_level=33)])
    sent = []

    async def send(request):
        sent.append(request)
        return answer

    client = SimpleNamespace(_manager=SimpleNamespace(
        send=send, config={"client_software_name": "kafka-python", "client_software_version": "3"}))
    finalized, versions = asyncio.run(read_cluster_features(client))
    assert finalized == {METADATA_VERSION: 33}
    assert versions == {DESCRIBE_LOG_DIRS: 5, DESCRIBE_CLUSTER: 2, 93: 0}
    assert len(sent) == 1  # one request for both
    support = assess_cluster(ClusterFeatures(finalized, versions))
    assert support.release == "4.4" and support.refusal is None
