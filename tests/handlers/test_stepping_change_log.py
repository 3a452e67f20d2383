"""The change log changes the cost of a batch, never its decision (`state.model.ChangeLog`).

`handlers.progress` tells `compute_stepping` what changed since the decision that made the memo
when the state's change log vouches for it. Every decision of scripted and random runs of
`decide` against the simulated cluster is taken three times — told what changed, from the memo
walking every record, and from nothing — and the three must agree; the set it was told must
hold every record and partition that truly differs from those the memo was made from (an
oracle walking everything). Each batch is also decided from the same state without its log
(the full walks), and the outbox and next state must be the same; and the commit's diff of the
reassignments, taken from the log, equals the full diff.

Batches: reassign, cancel (all, or one partition, keep or revert), a topic deleted or
re-created, min.insync.replicas changed, a snapshot dropping partitions, failed steps retried
or given up, a confirmed cancel, limits changed by SetConfig, brokers killed and restarted,
steps stalled with `stall.action=cancel`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from handler_builders import (Loop, alerts, changed_events, commands, partition_event, reassign, request, snapshot_end, tick,
                              topic_event)

import handlers.progress as progress
from handlers.decide import compute_latest_time_ms, decide
from handlers.micro_batch import BatchInputs
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic
from planning.movement.advance import compute_stepping
from state.stored_forms import compute_changes
from state.model import ChangeLog, ControllerState
from tests.settings_defaults import default_policy

DIRS = ("/d0", "/d1")


# --- the twin of compute_stepping -------------------------------------------------------------
def compute_true_changes(records_before, records_after, cluster_before: Cluster, cluster_after: Cluster) -> set:
    """The oracle: every partition whose record or PartitionState is not the same object, or whose
    topic's min ISR differs, walking everything."""
    truth = {tp for tp in set(records_before) | set(records_after) if records_before.get(tp) is not records_after.get(tp)}
    for tp in set(cluster_before.partitions_by_tp) | set(cluster_after.partitions_by_tp):
        if (cluster_before.partition(tp) is not cluster_after.partition(tp)
                or cluster_before.min_isr(tp.topic) != cluster_after.min_isr(tp.topic)):
            truth.add(tp)
    return truth


def assert_same_decision(one, other) -> None:
    assert one.started == other.started
    assert dict(one.reassignments) == dict(other.reassignments)
    assert (one.elections, one.finished, one.stalled, one.completed) == \
        (other.elections, other.finished, other.stalled, other.completed)
    assert one.memo.order == other.memo.order
    assert dict(one.memo.waiting).keys() == dict(other.memo.waiting).keys()
    assert (one.memo.unsettled, one.memo.in_flight) == (other.memo.unsettled, other.memo.in_flight)


@contextmanager
def twin_stepping():
    """`handlers.progress.compute_stepping` replaced by the twin; yields its counts."""
    seen = {"decisions": 0, "told": 0, "told_sizes": [], "records": []}
    made: dict[int, tuple] = {}  # id(memo) → (memo, the records returned, the cluster read)

    def twin(records, cluster, limits, now, stall_timeout, *, start_steps=True, memo=None, changed=None):
        args = (cluster, limits, now, stall_timeout)
        told = compute_stepping(records, *args, start_steps=start_steps, memo=memo, changed=changed)
        walked = compute_stepping(records, *args, start_steps=start_steps, memo=memo)
        fresh = compute_stepping(dict(records), *args, start_steps=start_steps)
        assert_same_decision(told, walked)
        assert_same_decision(told, fresh)
        # handle_progress patches the state with `replaced` alone: it must name every new record
        assert told.replaced == {tp for tp, r in told.reassignments.items() if r is not records.get(tp)}
        if changed is not None:
            remembered, records_before, cluster_before = made[id(memo)]
            assert remembered is memo
            truth = compute_true_changes(records_before, records, cluster_before, cluster)
            assert truth <= set(changed), f"not logged: {sorted(truth - set(changed))}"
            seen["told"] += 1
            seen["told_sizes"].append(len(changed))
        seen["records"].append(len(records))
        made[id(told.memo)] = (told.memo, told.reassignments, cluster)
        seen["decisions"] += 1
        return told

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(progress, "compute_stepping", twin)
        yield seen


def without_log(state: ControllerState) -> ControllerState:
    return replace(state, change_log=ChangeLog())


def normalised(changes: dict) -> dict:
    out = {}
    for name, change in changes.items():
        pairs = change["set"]
        out[name] = (dict(zip(pairs[::2], pairs[1::2])), sorted(change["del"]))
    return out


class TwinLoop(Loop):
    """`Loop` (with command results) deciding every batch also from the same state without its
    change log: the outbox and the next state must be the same, and the commit's diff of the
    reassignments from the log the full one."""

    short_diffs: int = 0

    def step(self, requests=(), extra_events=(), results=()):
        view = self.sim.snapshot()
        events = changed_events(self.seen, view, self.now_ms) + tuple(extra_events)
        self.seen = view
        inputs = BatchInputs(self.batch, self.now_ms, events, tuple(requests) or (tick(self.now_ms),),
                             tuple(results))
        assert self.state.compute_records_in_flight() == without_log(self.state).compute_records_in_flight()
        assert compute_latest_time_ms(self.state) == compute_latest_time_ms(without_log(self.state))
        blind = decide(without_log(self.state), inputs, self.policy)
        decision = decide(self.state, inputs, self.policy)
        assert decision.outbox == blind.outbox
        assert decision.state == blind.state
        assert decision.state.compute_batch_changes(self.state) is not None
        assert normalised(compute_changes(self.state, decision.state)) == \
            normalised(compute_changes(self.state, without_log(decision.state)))
        self.short_diffs += 1
        self.batch += 1
        self.state = decision.state
        self.decisions.append(decision)
        self.check(decision)
        self.apply(decision)
        return decision


# --- scripted batches -------------------------------------------------------------------------
def two_topics(brokers: int = 6, partitions: int = 8, size: int = 2 * 10**8) -> Cluster:
    bs = tuple(Broker(b, rack=f"r{b % 3}", log_dirs=tuple(LogDir(d) for d in DIRS)) for b in range(brokers))
    topics = []
    for t in range(2):
        parts = tuple(PartitionState(f"t{t}", n, tuple((n + i) % brokers for i in range(3)),
                                     tuple((n + i) % brokers for i in range(3)), n % brokers, size_bytes=size,
                                     log_dirs=tuple(DIRS[(n + i) % 2] for i in range(3)), leader_epoch=0)
                      for n in range(partitions))
        topics.append(Topic(f"t{t}", parts, 2, topic_id=f"id-t{t}"))
    return Cluster(bs, tuple(topics))


def moved_away(cluster: Cluster, shift: int = 3) -> dict:
    n = len(cluster.brokers)
    return {p.tp: tuple((b + shift) % n for b in p.replicas) for p in cluster.partitions()}


def failed_result(loop: Loop, record, code: str) -> dict:
    number = record.in_flight.number
    return {"schema_version": 1, "event_time": loop.now_ms, "id": f"res-{loop.batch}-{record.tp}",
            "key": f"{record.tp.topic}-{record.tp.partition}",
            "command_id": record.command_id("ReassignmentStep", number), "command_kind": "ReassignmentStep",
            "epoch": 0, "reassignment_id": record.reassignment_id, "step": number, "ok": False,
            "error_code": code, "message": f"{code} from the test"}


def run(loop: Loop, seconds: int) -> None:
    for _ in range(seconds):
        loop.step()
        loop.sim.tick(1.0)


def test_scripted_batches_decide_the_same_told_what_changed():
    policy = replace(default_policy(), max_partition_movements=4, max_movements_per_broker=3,
                     step_stall_timeout_seconds=4.0, stall_action="cancel", step_retry_max=1)
    cluster = two_topics()
    with twin_stepping() as seen:
        loop = TwinLoop.start(cluster, policy, bytes_per_sec=10**8)
        loop.step()
        loop.step([reassign(moved_away(cluster), loop.now_ms, "r1")])
        run(loop, 3)
        # a failed step retried, then another given up
        flying = [r for r in loop.state.reassignments.values() if r.in_flight is not None]
        assert len(flying) >= 2
        loop.step(results=[failed_result(loop, flying[0], "REQUEST_TIMED_OUT"),
                           failed_result(loop, flying[1], "INVALID_REPLICA_ASSIGNMENT")])
        run(loop, 2)
        # the limits change
        loop.step([request("SetConfig", {"key": "reassignment.max.concurrent.partition.movements",
                                         "value": "6"}, loop.now_ms, "cfg-1")])
        run(loop, 2)
        # min.insync.replicas of t1 changes
        t1 = loop.seen.topics_by_name["t1"]
        loop.step(extra_events=[topic_event(replace(t1, min_insync_replicas=1), loop.now_ms)])
        run(loop, 2)
        # a snapshot whose inventory no longer holds t1's last two partitions
        smaller = replace(t1, partitions=t1.partitions[:-2])
        inventory = Cluster(loop.seen.brokers, (loop.seen.topics_by_name["t0"], smaller))
        loop.step(extra_events=[snapshot_end(inventory, loop.now_ms, "snap-drop")])
        run(loop, 2)
        # t1 re-created (a new topic id), its partitions told again
        t1 = loop.seen.topics_by_name["t1"]
        loop.step(extra_events=[topic_event(replace(t1, topic_id="id-t1-new"), loop.now_ms)]
                  + [partition_event(p, loop.now_ms) for p in t1.partitions])
        run(loop, 2)
        # a broker dies; cancel one partition (keep), then everything
        loop.sim.kill_broker(5)
        loop.step([request("Cancel", {"topic": "t0", "partition": 1, "keep": True}, loop.now_ms, "c-1")])
        run(loop, 2)
        loop.step([request("Cancel", {"topic": None, "partition": None, "keep": False}, loop.now_ms, "c-all")])
        run(loop, 3)
        # t0 deleted
        loop.step(extra_events=[topic_event(loop.seen.topics_by_name["t0"], loop.now_ms, deleted=True)])
        loop.sim.restart_broker(5)
        run(loop, 40)
        # a new plan after all that, with slow copies: steps stall and are cancelled
        loop.sim.params = replace(loop.sim.params, bytes_per_sec=10**6)
        t1_only = Cluster(loop.seen.brokers, (loop.seen.topics_by_name["t1"],))  # t0 is deleted
        loop.step([reassign(moved_away(t1_only, 1), loop.now_ms, "r2")])
        run(loop, 30)
    assert not loop.violations, loop.violations
    assert any(alerts(d, "ReassignmentStalled") for d in loop.decisions)
    assert any(alerts(d, "TopicDeleted") for d in loop.decisions)
    assert any(alerts(d, "SnapshotReconciled") for d in loop.decisions)
    # every decision but the first (no memo yet) was told what changed; the twins without the
    # log (the blind decisions) were not
    assert seen["decisions"] == 2 * loop.batch and seen["told"] == loop.batch - 1
    assert loop.short_diffs == loop.batch


# --- random batches ---------------------------------------------------------------------------
@st.composite
def clusters(draw):
    n = draw(st.integers(4, 7))
    brokers = tuple(Broker(b, rack=f"r{b % 3}", log_dirs=tuple(LogDir(d) for d in DIRS)) for b in range(n))
    topics = []
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, 3))
        parts = []
        for p in range(draw(st.integers(1, 6))):
            replicas = tuple(draw(st.permutations(range(n)))[:rf])
            parts.append(PartitionState(f"t{t}", p, replicas, replicas, replicas[0],
                                        size_bytes=draw(st.integers(0, 3 * 10**8)),
                                        log_dirs=tuple(draw(st.sampled_from(DIRS)) for _ in replicas),
                                        leader_epoch=0))
        topics.append(Topic(f"t{t}", tuple(parts), draw(st.integers(1, rf)), topic_id=f"id-t{t}"))
    return Cluster(brokers, tuple(topics))


policies = st.builds(
    lambda p, lm, r, b, stall, action, retries: replace(
        default_policy(), max_partition_movements=p, max_leader_movements=lm, max_replica_movements=r,
        max_movements_per_broker=b, step_stall_timeout_seconds=stall, stall_action=action,
        step_retry_max=retries, broker_failure_grace_seconds=3.0),
    st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
    st.sampled_from([2.0, 600.0]), st.sampled_from(["alert", "cancel"]), st.integers(0, 2))

# Weighted by repetition: mostly time passing and plans, now and then something drastic.
ACTIONS = ("tick",) * 6 + ("reassign",) * 3 + ("cancel_one", "fail_step", "fail_step", "confirm_cancel", "min_isr",
                                             "snapshot_drop", "set_limit", "kill_broker", "restart_broker") \
    + ("cancel_all", "delete_topic", "recreate_topic") * 1


def draw_batch(data, loop: TwinLoop, number: int):
    """(requests, extra events, command results) of one random batch."""
    requests, events, results = [], [], []
    view = loop.seen or loop.sim.snapshot()
    known = loop.state.cluster  # what the controller knows (a deleted topic is not there)
    now = loop.now_ms
    for i, action in enumerate(data.draw(st.lists(st.sampled_from(ACTIONS), max_size=3), label="actions")):
        rid = f"{action}-{number}-{i}"
        topics = [t for t in view.topics if t.partitions]
        if action == "reassign" and any(t.partitions for t in known.topics):
            n = len(view.brokers)
            chosen = data.draw(st.lists(st.sampled_from([p for t in known.topics for p in t.partitions]),
                                        min_size=1, max_size=6, unique_by=lambda p: p.tp))
            targets = {p.tp: tuple(data.draw(st.permutations(range(n)))[:len(p.replicas)]) for p in chosen}
            requests.append(reassign(targets, now, rid))
        elif action == "cancel_all":
            requests.append(request("Cancel", {"topic": None, "partition": None,
                                               "keep": data.draw(st.booleans())}, now, rid))
        elif action == "cancel_one" and loop.state.reassignments:
            tp = data.draw(st.sampled_from(sorted(loop.state.reassignments)))
            requests.append(request("Cancel", {"topic": tp.topic, "partition": tp.partition,
                                               "keep": data.draw(st.booleans())}, now, rid))
        elif action == "min_isr" and topics:
            t = data.draw(st.sampled_from(topics))
            events.append(topic_event(replace(t, min_insync_replicas=data.draw(st.integers(1, 3))), now))
        elif action == "delete_topic" and topics:
            events.append(topic_event(data.draw(st.sampled_from(topics)), now, deleted=True))
        elif action == "recreate_topic" and topics:
            t = data.draw(st.sampled_from(topics))
            events.append(topic_event(replace(t, topic_id=f"{t.topic_id}-{number}"), now))
            events.extend(partition_event(p, now) for p in t.partitions)
        elif action == "snapshot_drop" and topics:
            t = data.draw(st.sampled_from(topics))
            keep = data.draw(st.integers(1, len(t.partitions)))
            inventory = Cluster(view.brokers, tuple(replace(x, partitions=x.partitions[:keep]) if x is t else x
                                                    for x in view.topics))
            events.append(snapshot_end(inventory, now, f"snap-{number}"))
        elif action == "fail_step":
            flying = sorted((r for r in loop.state.reassignments.values() if r.in_flight is not None),
                            key=lambda r: r.tp)
            if flying:
                record = data.draw(st.sampled_from(flying))
                code = data.draw(st.sampled_from(["REQUEST_TIMED_OUT", "INVALID_REPLICA_ASSIGNMENT"]))
                results.append(failed_result(loop, record, code))
        elif action == "confirm_cancel":
            cancelling = sorted((r for r in loop.state.reassignments.values()
                                 if r.in_flight is not None and r.state.value == "cancelling"), key=lambda r: r.tp)
            if cancelling:
                record = data.draw(st.sampled_from(cancelling))
                results.append({**failed_result(loop, record, ""), "ok": True, "error_code": None,
                                "command_kind": "CancelReassignment",
                                "command_id": record.command_id("CancelReassignment", record.in_flight.number)})
        elif action == "set_limit":
            key = data.draw(st.sampled_from(["reassignment.max.concurrent.partition.movements",
                                             "reassignment.max.concurrent.movements.per.broker"]))
            requests.append(request("SetConfig", {"key": key, "value": str(data.draw(st.integers(1, 5)))}, now, rid))
        elif action == "kill_broker":
            loop.sim.kill_broker(data.draw(st.integers(0, len(view.brokers) - 1)))
        elif action == "restart_broker":
            dead = [b.id for b in loop.sim.snapshot().brokers if not b.alive]
            if dead:
                loop.sim.restart_broker(data.draw(st.sampled_from(dead)))
    return requests, events, results


@settings(max_examples=int(__import__("os").environ.get("CHANGE_LOG_EXAMPLES", "40")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cluster=clusters(), policy=policies, data=st.data())
def test_random_batches_decide_the_same_told_what_changed(cluster, policy, data):
    with twin_stepping() as seen:
        loop = TwinLoop.start(cluster, policy, bytes_per_sec=data.draw(st.sampled_from([10**6, 10**8])))
        loop.step()
        for number in range(data.draw(st.integers(5, 30), label="batches")):
            requests, events, results = draw_batch(data, loop, number)
            if number == 0:  # a plan to work on
                requests.append(reassign(moved_away(loop.state.cluster, data.draw(st.integers(1, 3))),
                                         loop.now_ms, "first"))
            loop.step(requests, events, results)
            loop.sim.tick(data.draw(st.sampled_from([0.5, 1.0, 3.0])))
    assert seen["decisions"] == 2 * loop.batch and seen["told"] == loop.batch - 1
    # what the runs went through (--hypothesis-show-statistics)
    steps = sum(len(commands(d, "ReassignmentStep")) for d in loop.decisions)
    event(f"steps started: {'0' if not steps else '1-9' if steps < 10 else '10+'}")
    for kind in ("ReassignmentStalled", "CommandFailed", "ReassignmentCancelled", "ReassignmentCompleted",
                 "TopicDeleted", "SnapshotReconciled"):
        if any(alerts(d, kind) for d in loop.decisions):
            event(f"alert {kind}")
