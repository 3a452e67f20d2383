"""Cordons on a real cluster (Kafka 4.3+, KIP-1066): a broker the product drains is cordoned, so a
topic created during the drain gets no replica on it; a recommission removes the product's
cordon and gives back the one someone else had set there. The handlers decide, the real executor
applies (`HandlersLoop`). Runs its own stack (it cordons brokers), on a local stack of Kafka 4.3+
(`make test-kafka-versions` runs it on 4.4.0); a cluster that reports no cordons all the same (4.3
binaries on an older metadata.version) is checked to be asked nothing."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from planning.model import CORDONS
from reassigner.dev.harness.handlers_loop import HandlersLoop
from runtime.clients.cluster_observation import CORDONED_LOG_DIRS
from runtime.settings import compute_policy, load_settings
from schemas.errors import ReassignerError
from tests.waiting import eventually

RELEASE = load_settings().local_kafka_version
# A stack of its own, only where the local stack runs a Kafka with cordons (4.3+: `make
# test-kafka-versions` on 4.4.0); the same decisions on an older Kafka ask nothing of the cluster,
# which tests/handlers/test_cordons.py proves without one.
pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long,
              pytest.mark.skipif(tuple(int(x) for x in RELEASE.split(".")[:2]) < (4, 3),
                                 reason=f"the local stack runs Kafka {RELEASE}, which has no cordons (4.3+)")]

DRAINED = 3


def create(bootstrap: str, name: str, partitions: int, replication_factor: int,
           validate_only: bool = False) -> str | None:
    """Create a topic, Kafka's placer choosing the brokers (or only ask whether it could be,
    `validate_only`: the controller places it all the same); the error when refused."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        client.create_topics({name: {"num_partitions": partitions, "replication_factor": replication_factor}},
                             validate_only=validate_only, wait_for_metadata=not validate_only)
        return None
    except KafkaError as error:
        return f"{type(error).__name__}: {error}"
    finally:
        client.close()


def brokers_of(loop: HandlersLoop, topic: str) -> set[int]:
    partitions, _ = loop.admin.describe_partitions()
    return {b for p in partitions if p.topic == topic for b in p.replicas}


def placer_leaves_one_out(loop: HandlersLoop, brokers: int) -> bool:
    """Whether the controller's placer leaves a broker out: RF = every broker is refused then."""
    return create(loop.bootstrap_servers, f"probe-{uuid.uuid4().hex[:6]}", 1, brokers, validate_only=True) is not None


def applied(loop: HandlersLoop, kind: str) -> dict | None:
    """One decision; the first ok result of a `kind` command, if any. A failed one (a broker
    fenced for a moment on the loaded machine) is asked again at the next snapshot, as the
    watcher's periodic snapshot makes the pipeline do: the next decision polls one."""
    loop.decide()
    ok = [r for r in loop.results if r["command_kind"] == kind and r["ok"]]
    if ok:
        return ok[0]
    if any(r["command_kind"] == kind for r in loop.results):
        loop.observation = None
    return None


def cordoned_on(loop: HandlersLoop) -> str | None:
    """Broker 3's dynamic cordoned.log.dirs; None while it cannot be read (fenced for a moment)."""
    try:
        return loop.admin.describe_dynamic_configs([DRAINED], [], [CORDONED_LOG_DIRS])[(DRAINED, CORDONED_LOG_DIRS)]
    except ReassignerError:
        return None


def modelled_cordons(loop: HandlersLoop) -> set[str]:
    """After one more batch (a poll and its events), broker 3's dirs the pipeline's model holds
    cordoned."""
    loop.decide()
    return {d.path for d in loop.state.cluster.broker(DRAINED).log_dirs if d.cordoned}


def answered(call) -> bool:
    """`call()` done, or False when the cluster could not take it now (a broker fenced for a
    moment: the loaded machine's brokers miss heartbeats)."""
    try:
        call()
        return True
    except ReassignerError:
        return False


def test_a_drained_broker_is_cordoned_and_a_new_topic_lands_nowhere_on_it(private_stack):
    local, state = private_stack
    local.add_broker(rack="/dc2/r2")  # 4 brokers: the RF-3 topics can leave broker 3
    brokers = 4
    policy = compute_policy(load_settings(throttle_bytes_per_sec=10_000_000))
    theirs = state.brokers[DRAINED].log_dirs[0]  # an operator's cordon of one dir, before ours
    with HandlersLoop(state.bootstrap_servers, state.redis_url, policy) as loop:
        loop.decide()  # the first snapshot: which Kafka runs
        assert loop.state.kafka is not None
        if not loop.state.kafka.has(CORDONS):  # Kafka before 4.3: the drain as before, nothing cordoned
            loop.decide([loop.decommission([DRAINED])])
            assert not loop.commands_of("Cordon") and loop.state.cordoned == {}
            loop.decide([loop.recommission([DRAINED])])
            assert not loop.commands_of("Uncordon")
            return
        eventually(lambda: answered(lambda: loop.admin.alter_broker_configs([DRAINED], {CORDONED_LOG_DIRS: theirs})),
                   120, what="their cordon set on broker 3")
        try:
            # The watcher's read (DescribeLogDirs v5 `is_cordoned`) carries their cordon through
            # the events into the pipeline's model: that dir only, and not the product's.
            eventually(lambda: modelled_cordons(loop) == {theirs}, 60, what="their cordon in the model")
            assert loop.state.cordoned == {}
            loop.decide([loop.decommission([DRAINED])])
            eventually(lambda: applied(loop, "Cordon"), 120, what="the Cordon applied")
            assert {tuple(c["action"]["broker_ids"]) for c in loop.commands_of("Cordon")} == {(DRAINED,)}
            assert eventually(lambda: cordoned_on(loop), 60, what="broker 3's config read") == "*"
            every = {d.path for d in loop.state.cluster.broker(DRAINED).log_dirs if d.online}
            eventually(lambda: modelled_cordons(loop) == every, 60, what="every dir of broker 3 cordoned in the model")
            # The broker tells the controller its cordons in its heartbeats: wait until the
            # controller's placer leaves it out (RF 4 on 4 brokers is then refused).
            eventually(lambda: placer_leaves_one_out(loop, brokers), 120, what="the controller placing around broker 3")
            during = f"during-{uuid.uuid4().hex[:6]}"
            assert create(loop.bootstrap_servers, during, 12, 2) is None
            assert DRAINED not in brokers_of(loop, during)  # Kafka's placer would put ~6 of 24 replicas on it

            loop.decide([loop.recommission([DRAINED])])
            assert [c["action"]["broker_ids"] for c in loop.commands_of("Uncordon")] == [[DRAINED]]
            eventually(lambda: applied(loop, "Uncordon"), 120, what="the Uncordon applied")
            # Theirs is back, not deleted; ours is gone.
            assert eventually(lambda: cordoned_on(loop), 60, what="broker 3's config read") == theirs
            eventually(lambda: not placer_leaves_one_out(loop, brokers), 120, what="the controller placing on broker 3 again")
            after = f"after-{uuid.uuid4().hex[:6]}"
            assert create(loop.bootstrap_servers, after, 12, 2) is None
            assert DRAINED in brokers_of(loop, after)
        finally:
            eventually(lambda: answered(lambda: loop.admin.alter_broker_configs([DRAINED], {CORDONED_LOG_DIRS: None})),
                       120, what="broker 3's cordon removed")


PRESSED = 2  # the broker whose new, small dir fills up
SMALL_VOLUME = "64m"


def dirs_cordoned_on(loop: HandlersLoop, broker_id: int) -> str | None:
    try:
        return loop.admin.describe_dynamic_configs([broker_id], [], [CORDONED_LOG_DIRS])[(broker_id, CORDONED_LOG_DIRS)]
    except ReassignerError:
        return None


def test_a_full_dir_being_emptied_is_cordoned_and_new_replicas_land_in_the_brokers_other_dirs(private_stack):
    # Broker 2 gets a third dir on a 64 MB volume of its own, filled past the high-water mark
    # (80 %) by a file that is no replica: the relief has nothing to move (it says so) and the
    # dir is cordoned while it stays above the mark. Kafka puts a new replica in the broker's dir
    # with the fewest partitions (the new, empty one, but for the cordon).
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs volume for a log dir needs root")
    local, state = private_stack
    record = local.load().brokers[PRESSED]
    small = Path(record.node_dir) / f"data-{len(record.log_dirs)}"  # the name add_log_dir gives it
    small.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_VOLUME}", "tmpfs", str(small)], check=True)
    try:
        assert local.add_log_dir(PRESSED) == str(small)
        figures = os.statvfs(small)
        total = figures.f_blocks * figures.f_frsize
        (small / "filler").write_bytes(b"\0" * int(0.9 * total))
        # The log-dir balance is off: it would fill the new dir with replicas. The marks are the
        # product's defaults (the session turns them off: tests/conftest.py).
        policy = compute_policy(load_settings(logdir_imbalance_threshold=1.0, disk_max_usage_percent=85,
                                              disk_high_water_percent=80, disk_low_water_percent=75))
        with HandlersLoop(state.bootstrap_servers, state.redis_url, policy) as loop:
            loop.decide()
            if not loop.state.kafka.has(CORDONS):
                pytest.skip(f"Kafka {loop.state.kafka.release} has no cordons")

            def pressed_and_cordoned() -> bool:
                loop.observation = None  # a snapshot reads every dir's volume again
                loop.decide()
                return loop.state.cordoned.get(PRESSED) == (str(small),)

            eventually(pressed_and_cordoned, 120, what="the small dir seen pressed and its cordon decided")
            (cordon,) = loop.commands_of("Cordon")
            assert cordon["action"] == {"kind": "Cordon", "broker_ids": [PRESSED], "log_dirs": [str(small)]}
            eventually(lambda: applied(loop, "Cordon"), 120, what="the Cordon applied")
            assert eventually(lambda: dirs_cordoned_on(loop, PRESSED), 60, what="broker 2's config read") == str(small)

            topic = f"new-{uuid.uuid4().hex[:6]}"
            assert create(loop.bootstrap_servers, topic, 8, 3) is None
            assert PRESSED in eventually(lambda: brokers_of(loop, topic), 60, what=f"{topic} described")

            def placed_dirs() -> dict[str, int] | None:
                """Broker 2's dirs holding the topic's replicas, once it lists all of them."""
                partitions = [p for p in loop.admin.observe(None).partitions.values()
                              if p.topic == topic and PRESSED in p.replicas]
                dirs = [p.log_dirs[p.replicas.index(PRESSED)] if p.log_dirs else None for p in partitions]
                return None if not dirs or None in dirs else {d: dirs.count(d) for d in set(dirs)}

            counts = eventually(placed_dirs, 60, what=f"broker 2's dirs listing {topic}")
            assert str(small) not in counts, counts  # the new, empty dir would have them all

            (small / "filler").unlink()  # under the mark again: the cordon is taken back

            def uncordoned() -> bool:
                loop.observation = None
                loop.decide()
                return PRESSED not in loop.state.cordoned

            eventually(uncordoned, 120, what="the small dir seen relieved and its Uncordon decided")
            eventually(lambda: applied(loop, "Uncordon"), 120, what="the Uncordon applied")

            def cordon_gone() -> bool:
                try:
                    now = loop.admin.describe_dynamic_configs([PRESSED], [], [CORDONED_LOG_DIRS])
                except ReassignerError:  # fenced for a moment: read again
                    return False
                return now.get((PRESSED, CORDONED_LOG_DIRS)) in (None, "")

            eventually(cordon_gone, 60, what="broker 2's cordon gone (nothing was there before ours)")
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
