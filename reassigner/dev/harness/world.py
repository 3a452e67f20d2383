"""The world the demo and the scenario tests share: the stage (`reassigner.dev.harness.stage`:
the cluster, the product, the instruments) and the scenes that act on it.

Each scene (`add_broker`, `decommission`, `fail_log_dir`, `add_log_dir`, `cancel_manual`,
`kill_broker`, `bad_input`) acts as an operator or a failing machine would and waits on what
Kafka itself shows, never on sleeps; `scene(name, world.add_broker)` runs one and records its
figures.

The demo (`reassigner.dev.demo.story`) tells the scenes in order with a summary; the scenario
tests (tests/scenarios) run them one by one and assert on the cluster.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from planning.model import TopicPartition
from reassigner.dev.harness.cluster_tools import SlowReplication, throttled_brokers, write_bulk
from reassigner.dev.harness.stage import (
    BULK_TOPIC,
    CLUSTER_NAME,
    DEMO_SETTINGS,
    MIN_INSYNC_REPLICAS,
    TOPICS,
    SceneResult,
    Stage,
    replica_disagreements,
)
from reassigner.dev.local.kafka_admin import client_settings

# The stage's names the scenario and fault tests read through this module.
__all__ = ["BULK_TOPIC", "CLUSTER_NAME", "DEMO_SETTINGS", "MIN_INSYNC_REPLICAS", "TOPICS", "SceneResult",
           "World", "plan_manual_moves", "replica_disagreements"]

ADDED_RACKS = ("/dc2/r2", "/dc1/r3")  # the two brokers of scene 1 (ids 4 and 5)
ADD_GRACE_SECONDS = 30  # scene 1: longer than one broker takes to start, so both share a plan


def plan_manual_moves(replicas: dict[tuple[str, int], list[int]], hosts: dict[tuple[str, int], set[int]],
                      count: int) -> dict[tuple[str, int], list[int]]:
    """The demo operator's manual plan: for up to `count` partitions, one replica replaced by a
    broker of `hosts[partition]` that does not hold it yet, the replication factor kept. Broker
    ids are taken lowest first; a replica on a broker outside `hosts` is the one replaced when
    there is one (moving off a broken broker is what an operator would do), else the last.
    Partitions with no such broker are left out."""
    targets: dict[tuple[str, int], list[int]] = {}
    for tp in sorted(replicas):
        current, allowed = list(replicas[tp]), hosts.get(tp, set())
        incoming = sorted(allowed - set(current))
        if not incoming or len(targets) >= count:
            continue
        leaving = next((b for b in current if b not in allowed), current[-1])
        targets[tp] = [incoming[0] if b == leaving else b for b in current]
    return targets


class World(Stage):
    """The stage and its scenes; each scene takes the `SceneResult` that `scene` records."""

    def add_broker(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        # A broker takes several seconds to start here: a grace longer than the demo's 5 s lets
        # the second addition join the first one's plan.
        self.set_config(f"broker.add.grace={ADD_GRACE_SECONDS}")
        try:
            added = [self.stack.add_broker(rack=rack) for rack in ADDED_RACKS]
            names = " and ".join(f"{b.id} (rack {b.rack})" for b in added)
            self.say(f"  `reassigner config set broker.add.grace={ADD_GRACE_SECONDS}`; brokers {names} "
                     "joined; the product waits out the add grace, so that the two additions coalesce "
                     "into one plan")
            self.alerts.wait_for("BrokerAdded", since, 60)
            self.alerts.wait_for("PlanCreated", since, ADD_GRACE_SECONDS + 90)
        finally:
            self.set_config("broker.add.grace=")
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say(f"  plan: replica moves {result.replica_moves}, lower bound {result.lower_bound}")
        self.wait("rebalancing onto the new brokers (steps in rolling batches)",
                  lambda: self.settled(since), timeout=300)
        held = ", ".join(f"broker {b.id}: {self.replicas_on(b.id)}" for b in added)
        self.say(f"  replicas of the demo topics now on the new brokers — {held}")

    def decommission(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        self.cli("request", "decommission", "--broker", "2")
        self.say("  `reassigner request decommission --broker 2`")
        self.wait("draining broker 2", lambda: (1 if self.replicas_on(2) == 0 else 0, 1), 300)
        self.alerts.wait_for("BrokerDrained", since, 60)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  broker 2 holds nothing: BrokerDrained")

    def fail_log_dir(self, result: SceneResult) -> None:
        # Broker 1, which scene 5 kills: Kafka cannot host again, until it restarts, a partition
        # that its failed dir held. The product keeps those off it (Broker.cannot_host); the
        # manual request of scene 4 leaves broker 1 out altogether, as an operator would.
        since = self.alerts.mark()
        self.cli("local", "fail-logdir", "1", "data-0")  # returns once Kafka shows the dir offline
        offline_at = time.monotonic()
        self.say("  log dir data-0 of broker 1 replaced by a plain file; Kafka took it offline")
        # Normally a few seconds (watcher poll + one micro-batch); generous for a loaded machine.
        disk = self.alerts.wait_for("DiskFailed", since, 150, on_wait=self.product.check_alive)
        self.say(f"  → DiskFailed {time.monotonic() - offline_at:.0f} s later: {disk['message']}")
        self.wait("restoring the replication factor", lambda: self.settled(since), 300)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  every partition has its 3 replicas in sync again")
        kept_off = self.controller_state().cluster.broker(1).cannot_host
        self.say(f"  {len(kept_off)} partitions the dir held stay off broker 1 until it restarts "
                 "(Kafka would not start them there)")

    def add_log_dir(self, result: SceneResult, broker_id: int = 3) -> None:
        """A disk added: the broker restarts with one more, empty log dir; the product moves
        replicas into it (largest first) until the broker's dirs hold their shares."""
        since = self.alerts.mark()
        # The restart takes the broker away for some seconds: a long failure grace keeps the
        # product from healing it meanwhile (the operator's restart is not a failure).
        self.set_config("broker.failure.grace=600")
        try:
            added = self.stack.add_log_dir(broker_id)
            self.say(f"  `reassigner local add-logdir {broker_id}`: broker {broker_id} restarted with a new, "
                     f"empty log dir {Path(added).name}")
            # The plan that fills the new dir, and the end of that plan: a balance of the broker's
            # other dirs may start and end just before the restart, and is not the one awaited.
            self.planned_dirs = self.alerts.wait_for(
                "LogDirsUnbalanced", since, 180, on_wait=self.product.check_alive,
                where=lambda a: (a["details"].get("broker_id") == str(broker_id)
                                 and a["details"].get("executed") == "true"
                                 and f"->{added}" in a["details"].get("moves_list", "")))
            self.say(f"  → {self.planned_dirs['message']}")
            task_id = self.planned_dirs["details"]["task_id"]
            balanced = self.alerts.wait_for(
                "LogDirsBalanced", since, 300, on_wait=self.product.check_alive,
                where=lambda a: a["details"].get("task_id") == task_id)
            self.say(f"  → LogDirsBalanced: {balanced['message']}")
            self.wait(f"broker {broker_id} back in every ISR", lambda: self.settled(since), 300)
        finally:
            self.set_config("broker.failure.grace=")
        result.replica_moves, result.lower_bound = self.planned_dirs["details"]["moves"], "-"
        self.added_dir = added

    def cancel_manual(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        commands_before = self.commands.mark()
        # The operator's starting point: Kafka's replicas, once the product's view agrees with
        # them and nothing of the topic moves (the heal of scene 3 may still be settling it).
        self.wait("the product's view of the bulk topic agrees with Kafka's",
                  lambda: not self.bulk_topic_disagreement(), 60)
        parts = self.probe.partitions([BULK_TOPIC])
        state = self.controller_state()
        live = [b for b, info in self.probe.brokers().items() if not info.get("is_fenced", False)]
        # Not broker 2 (decommissioned), nor a broker Kafka would not start the replica on (a
        # partition broker 1's failed dir held: see `fail_log_dir`).
        hosts = {tp: {b for b in live if b != 2}
                 - state.cluster.brokers_that_cannot_host(TopicPartition(*tp)) for tp in parts}
        targets = plan_manual_moves({tp: p["replicas"] for tp, p in parts.items()}, hosts, 2)
        if not targets:
            raise AssertionError(f"no partition of {BULK_TOPIC} can take a new replica: "
                                 f"{ {tp: p['replicas'] for tp, p in parts.items()} }, hosts {hosts}")
        chosen = sorted(targets)
        before = {tp: parts[tp]["replicas"] for tp in chosen}
        # Some bulk data, moved slowly, so that the cancel lands mid-flight: the product's own
        # throttle reaches the brokers only after its steps have started (a few MB copy in
        # well under a second locally), so the demo first slows replication of the topic
        # itself, as a busy network would (`SlowReplication`, Kafka's quotas).
        write_bulk(self.bootstrap, chosen, megabytes=4, client=self.client)
        with SlowReplication(self.bootstrap, BULK_TOPIC, live, 100_000, client=self.client):
            self.cli("config", "set", "throttle.bytes.per.sec=300000")
            plan = {"version": 1, "partitions": [
                {"topic": t, "partition": p, "replicas": targets[(t, p)]} for t, p in chosen]}
            plan_file = self.stack_dir / "manual-plan.json"
            plan_file.write_text(json.dumps(plan))
            self.cli("request", "reassign", "--file", str(plan_file))
            self.say(f"  `reassigner request reassign --file {plan_file.name}`: {len(chosen)} partitions "
                     "with 4 MB each, throttled to 300 kB/s")
            try:
                self.cancel_mid_flight(since, commands_before, before)
            except Exception:
                # Leave nothing running for the next scenes (a step towards broker 1, which scene
                # 5 kills, would never finish).
                self.cli("request", "cancel", check=False)
                raise
        self.cli("config", "set", "throttle.bytes.per.sec=")
        self.commands.wait_for("ClearThrottle", commands_before, 60)
        self.wait("the product clears its throttle", lambda: not throttled_brokers(self.bootstrap, live, self.client), 60)
        self.say("  every partition is back on its original replicas; throttle cleared")

    def cancel_mid_flight(self, since: int, commands_before: int,
                          before: dict[tuple[str, int], list[int]]) -> None:
        """Once the manual plan is running: cancel it while its first steps copy data, and wait
        until every partition is back on its `before` replicas."""
        chosen = sorted(before)
        plan_created = self.alerts.wait_for("PlanCreated", since, 90)
        moves = int(plan_created["details"].get("replica_moves", 0))
        if moves != len(chosen):
            raise AssertionError(
                f"the product planned {moves} replica moves for {len(chosen)} new replicas: its "
                f"view of {BULK_TOPIC} was not Kafka's at the start of the scene ({before}); now "
                f"{self.bulk_topic_disagreement() or 'they agree'}")
        self.commands.wait_for("ReassignmentStep", commands_before, 90)
        self.wait("the first steps copy data", lambda: any(
            p["reassigning"] for p in self.probe.partitions([BULK_TOPIC]).values()), 60)
        self.cli("request", "cancel")
        self.say("  `reassigner request cancel` while the first step copies data")
        self.alerts.wait_for("ReassignmentCancelled", since, 90,
                             where=lambda a: "back at its original replicas" in a["message"])
        self.wait("reverting to the original replicas",
                  lambda: (sum(sorted(self.probe.partitions([BULK_TOPIC])[tp]["replicas"])
                               == sorted(before[tp]) for tp in chosen), len(chosen)), 180)

    def bulk_topic_disagreement(self) -> str:
        """Where Kafka and the product disagree on the bulk topic's replicas, or where either
        shows it moving ('' when they agree and it is still)."""
        kafka = self.probe.partitions([BULK_TOPIC])
        state = self.controller_state()
        moving = [f"{t}-{n} is moving" for (t, n), seen in sorted(kafka.items())
                  if seen["reassigning"] or TopicPartition(t, n) in state.reassignments]
        return "; ".join(moving + replica_disagreements(kafka, state))

    def kill_broker(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        self.stack.stop_broker(1, kill=True)
        self.say("  broker 1 killed (SIGKILL); healing starts once the failure grace (15 s) has passed")
        self.alerts.wait_for("BrokerFailed", since, 90)
        self.wait("healing: replicas of broker 1 move to live brokers", lambda: self.settled(since), 300)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  healed: every partition has 3 in-sync replicas on live brokers")

    def bad_input(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        bad_plan = self.stack_dir / "bad-plan.json"
        bad_plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [3, 99, 4]}]}))
        refused = self.cli("request", "reassign", "--file", str(bad_plan), check=False)
        if refused.returncode != 2 or "INVALID_REPLICA_ASSIGNMENT" not in refused.stderr:
            raise RuntimeError(f"a reassignment to broker 99 was not refused locally: {refused.stderr.strip()}")
        self.say(f"  a reassignment naming broker 99 (unknown) → refused before publishing: {refused.stderr.strip()}")
        answered = self.cli("request", "approve", "no-such-proposal", check=False)  # only the pipeline knows
        rejected = self.alerts.wait_for("RequestRejected", since, 60)
        self.say(f"  an approval of an unknown proposal → exit {answered.returncode}, RequestRejected: "
                 f"{rejected['message']}")
        from confluent_kafka import Producer

        producer = Producer(client_settings(self.bootstrap, self.client))
        producer.produce("reassigner.isr-changes", key=b"garbage", value=b"\x07not avro\xff")
        producer.flush(10)
        self.say("  a garbage message on reassigner.isr-changes")
        bad = self.alerts.wait_for("BadEvent", since, 60)
        self.say(f"  → BadEvent: {bad['message']} (the record went to reassigner.dead-letter)")
