"""Which Kafka a cluster runs, and what the product can do on it: read from what the cluster
finalized, never from a version string.

Rule. A KRaft cluster always finalizes `metadata.version` (a ZooKeeper-mode broker never does),
and its level names the release line: each release's newest production level is in
`RELEASE_LEVELS`, and a level between two of them belongs to the older release (a cluster not yet
upgraded to its binaries' newest level runs as that older release). What the product needs of
Kafka is in `CAPABILITIES`: each capability needs a metadata.version level, a finalized feature
level, or a request version the brokers answer, and says what the product does without it.

The verdict (`assess_cluster`):
- refused, in one line: a ZooKeeper-mode cluster (Kafka 4.0 removed ZooKeeper mode; the product
  reads brokers and dirs as KRaft registers them, and no ZooKeeper cluster is in its CI), and a
  KRaft cluster older than 3.7 (metadata.version below 3.7-IV0, level 15: the oldest the product
  is tested on);
- otherwise supported, with one warning line per capability the cluster lacks, naming the
  release that brings it.

Invariants: pure (no I/O, no clock); the same features give the same verdict; a newer level than
any known is the newest known release "or later", never refused; the release names the newest
production level at or below the cluster's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

# The capability names (`KafkaFacts.capabilities`) live with `KafkaFacts`, where the pure
# decisions read them; what each needs from the cluster is decided here.
from planning.model import CORDONS, ELIGIBLE_LEADERS, FENCED_BROKERS, LOG_DIR_MOVES

METADATA_VERSION = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"

RELEASE_LEVELS: tuple[tuple[int, str, str], ...] = (
    (19, "3.7", "3.7-IV4"),
    (20, "3.8", "3.8-IV0"),
    (21, "3.9", "3.9-IV0"),
    (25, "4.0", "4.0-IV3"),
    (27, "4.1", "4.1-IV1"),
    (29, "4.2", "4.2-IV1"),
    (30, "4.3", "4.3-IV0"),
    (33, "4.4", "4.4-IV2"),
)
"""(metadata.version level, release, level name): each release's newest production level."""

OLDEST_LEVEL = 15
"""3.7-IV0: the oldest metadata.version the product runs on."""

DESCRIBE_LOG_DIRS = 35
DESCRIBE_CLUSTER = 60


LOCAL_RELEASES: tuple[str, ...] = ("3.7.2", "3.9.1", "4.1.1", "4.4.0")
"""The Kafka releases the product is tested on (the local stack's `local_kafka_version`): the
oldest and the newest supported and those between that CI runs. Any other release from 3.7 on
runs in the local stack too (its jars come from Maven Central); these are the proven ones."""

DEFAULT_LOCAL_RELEASE = "4.1.1"
"""What the local stack runs unless told otherwise (`REASSIGNER_LOCAL_KAFKA_VERSION`)."""


@dataclass(frozen=True)
class Capability:
    """Something the product uses that not every supported Kafka has."""

    name: str
    release: str
    """The first release that has it (for the warning)."""
    without: str
    """What the product does on a cluster without it."""
    level: int = 0
    """The metadata.version level it needs (0: none)."""
    feature: tuple[str, int] | None = None
    """A finalized feature level it needs, e.g. (ELR_FEATURE, 1)."""
    request: tuple[int, int] | None = None
    """(API key, version) the brokers must answer."""


CAPABILITIES: tuple[Capability, ...] = (
    Capability(LOG_DIR_MOVES, "3.7 (metadata.version 3.7-IV2)",
               "brokers have one dir each for the product: no log-dir moves, no dir-failure relief",
               level=17),
    Capability(FENCED_BROKERS, "4.0",
               "a fenced broker is seen only as missing from the cluster's brokers",
               request=(DESCRIBE_CLUSTER, 2)),
    Capability(ELIGIBLE_LEADERS, "4.1 (on for new clusters; 4.0 as a preview)",
               "the ISR alone says which replicas can lead",
               feature=(ELR_FEATURE, 1)),
    Capability(CORDONS, "4.3 (metadata.version 4.3-IV0)",
               "a broker being drained or a dir being emptied can still get new topics' replicas",
               level=30, request=(DESCRIBE_LOG_DIRS, 5)),
)


@dataclass(frozen=True)
class ClusterFeatures:
    """What a cluster told a client: its finalized feature levels and, per API key, the newest
    request version its brokers answer."""

    finalized: Mapping[str, int] = field(default_factory=dict)
    api_versions: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSupport:
    """The verdict on one cluster (module doc)."""

    release: str
    """"4.1", "4.3 or later", "ZooKeeper mode", "older than 3.7"."""
    level: int | None
    """Its metadata.version level; None in ZooKeeper mode."""
    has: tuple[str, ...]
    """The names of the capabilities it has."""
    warnings: tuple[str, ...]
    """One line per capability it lacks."""
    refusal: str | None
    """One line when the product cannot run on it; None when it can."""

    def summary(self) -> str:
        """One line naming the cluster's Kafka and what the product does there."""
        if self.refusal is not None:
            return self.refusal
        named = f"Kafka {self.release} (metadata.version level {self.level})"
        return f"{named}: {len(self.has)} of {len(CAPABILITIES)} capabilities" + (
            f"; without {', '.join(c.name for c in CAPABILITIES if c.name not in self.has)}"
            if len(self.has) < len(CAPABILITIES) else "")


def check_local_release(version: str) -> str:
    """`version` if the local stack can run it: a release number `X.Y.Z` from 3.7 on; else a
    `ValueError` with a one-line reason (the settings turn it into a configuration error)."""
    parts = version.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"{version!r} is no Kafka release number; expected X.Y.Z, e.g. "
                         f"{DEFAULT_LOCAL_RELEASE} (tested: {', '.join(LOCAL_RELEASES)})")
    if (int(parts[0]), int(parts[1])) < (3, 7):
        raise ValueError(f"Kafka {version} is older than 3.7, the oldest the product supports "
                         f"(tested: {', '.join(LOCAL_RELEASES)})")
    return version


def compute_release(level: int) -> str:
    """The release line of a metadata.version level (module doc)."""
    if level < OLDEST_LEVEL:
        return "older than 3.7"
    release = "3.7"
    for release_level, name, _ in RELEASE_LEVELS:
        if level >= release_level:
            release = name
    newest_level, newest, _ = RELEASE_LEVELS[-1]
    return f"{newest} or later" if level > newest_level else release


def has_capability(capability: Capability, features: ClusterFeatures) -> bool:
    level = features.finalized.get(METADATA_VERSION, 0)
    if level < capability.level:
        return False
    if capability.feature is not None:
        name, needed = capability.feature
        if features.finalized.get(name, 0) < needed:
            return False
    if capability.request is not None:
        key, needed = capability.request
        if features.api_versions.get(key, -1) < needed:
            return False
    return True


def assess_cluster(features: ClusterFeatures) -> ClusterSupport:
    """The verdict on a cluster from what it finalized and answers (module doc)."""
    level = features.finalized.get(METADATA_VERSION)
    if level is None:
        return ClusterSupport(
            "ZooKeeper mode", None, (), (),
            "the cluster finalizes no metadata.version, so it runs in ZooKeeper mode: the product "
            "supports KRaft clusters only (Kafka 3.7 or later); migrate it to KRaft first")
    release = compute_release(level)
    if level < OLDEST_LEVEL:
        return ClusterSupport(
            release, level, (), (),
            f"the cluster's metadata.version level is {level}, older than 3.7-IV0 (level {OLDEST_LEVEL}): "
            "the product supports Kafka 3.7 or later; upgrade the cluster's metadata.version")
    has = tuple(c.name for c in CAPABILITIES if has_capability(c, features))
    warnings = tuple(f"Kafka {release} has no {c.name} (from {c.release}): {c.without}"
                     for c in CAPABILITIES if c.name not in has)
    return ClusterSupport(release, level, has, warnings, None)
