"""Reactions to what the cluster did: membership, disks, drains, ISR conditions.

Each reaction reads the state after the batch's events, command results and requests, and the
`EventEffects` of the events; times are event times (`context.now_ms`), so a `Tick` request is
enough to let a grace period expire in a quiet cluster.

RULES, in the order `handle_triggers` runs them:
1. Membership. A broker that goes down (fenced/unregistered) is recorded with the event time in
   `broker_down_since_ms` and raises `BrokerFailed` (WARNING: "healing in N s"). A down broker
   that comes back leaves it and raises `BrokerRecovered`; if its healing was still pending
   (grace not over) that healing is simply never planned. A broker that comes up alive holding
   no replica (after the controller's first view of the cluster) is recorded in
   `broker_added_at_ms` and raises `BrokerAdded` at once — also when it was down before: a new
   broker is first seen fenced if a poll falls in the moment KRaft keeps it fenced after it
   registers, and a broker whose replicas were healed away comes back empty.
2. Broker added. Once the most recent addition is `broker_add_grace_seconds` old (so several
   additions coalesce into one plan), plan a rebalance (`Goal(rebalance=True, heal=False)`) for
   the added brokers that are still alive, eligible and empty of replicas we did not put there.
3. Broker failed. Down brokers whose grace `broker_failure_grace_seconds` is over and that are not
   healed yet: if more than `self_healing_max_failed_brokers` brokers are down, or at least
   `self_healing_max_failed_fraction` of them, raise `SelfHealingSuppressed` (CRITICAL, once per
   set of down brokers) and plan nothing; otherwise plan `Goal(heal=True, rebalance=False)` for
   the partitions holding a replica on those brokers and mark them healed.
4. Disk failed. A log dir that went offline raises `DiskFailed` (ERROR) with the replicas it held,
   and its partitions are healed at once (`Goal(heal=True, rebalance=False)`: the replica goes
   to another broker, never back to that dir's broker). No grace: the dir's data is gone. Those
   partitions are remembered on the broker (`Broker.cannot_host`) until it restarts (it shows no
   offline dir), so no later plan puts them back there: Kafka would never start such a replica
   (it keeps them marked as residing in an offline dir). A replica Kafka reports offline on a
   live broker with a failed dir is in that dir, whatever dir was last known for it (a log-dir
   move into the dir may have completed just before it failed); one reported so only in a
   later batch (its partition's event travels apart from the dir's) is healed then, once.
5. Drained. A draining broker that holds no replica and is in no target raises `BrokerDrained`
   (once).
   HEALS ARE PARTIAL (3 and 4): a partition that cannot be healed without breaking rack spread
   is left as it is and every other partition is healed (`Goal(partial=True)`); one
   `PlanInfeasible` names only those left. LAST RESORT: of those, a partition whose in-sync
   replicas are fewer than its topic's min.insync.replicas (producers with acks=all are already
   refused) is healed without rack spread (`Goal(ignore_racks=True)`), with a
   `PlanInfeasible` (WARNING) saying so: availability comes before spread, and a later
   rebalance restores the spread once brokers allow it. (Why partial: one partition that cannot
   keep rack spread must not leave every other one under-replicated until the broker is back.)
6. ISR conditions, for the partitions the batch touched: `UnderMinIsr` (ISR smaller than the
   topic's min.insync.replicas) and `OfflinePartitions` (no leader) alert once when the
   condition starts — one alert per topic and kind per batch, naming the partitions — and the
   condition is forgotten (silently) when it ends, so it alerts again if it comes back.
   A deleted topic raises `TopicDeleted` and its reassignments are dropped (Kafka forgets them);
   so does a topic re-created under the same name (a new topic id), for its old incarnation.
7. ISR shrinks outside the moves: a broker that fell out of the ISR of a partition that nothing
   moves (no reassignment of ours or another tool's, none shown by Kafka) is counted in
   `isr_shrinks` by the event's time, over the last ten minutes (`planning.movement.
   isr_shrinks`); no alert (the count is a signal: `status`, `/metrics`, the adaptive throttle).
0. Reconciled (runs first). What a snapshot's inventory removed (`handlers.events`: a deletion or
   unregistration event was lost) raises one `SnapshotReconciled` (WARNING) per snapshot naming
   the topics, partitions and brokers; the removals then get the reactions above like explicit
   events (`TopicDeleted`, `BrokerFailed`, ...).
"""

from __future__ import annotations

from dataclasses import replace

from handlers.outbox import CRITICAL, ERROR, INFO, WARNING, broker_subject, summarise
from handlers.context import BatchContext
from handlers.events import EventEffects
from handlers.plans import compute_plan, compute_plan_proof, handle_plan
from handlers.policy import compute_canary_topic
from planning.model import TopicPartition
from planning.movement.eta import add_finished_work, compute_finished_work
from planning.movement.isr_shrinks import add_isr_shrinks
from planning.placement.placer import Goal
from schemas.errors import ReassignerError

REBALANCE_PLAN_KIND = "rebalance"  # a broker addition's rebalance is plan `b<batch>-rebalance-<n>`


def handle_triggers(context: BatchContext, effects: EventEffects) -> None:
    """Run the reactions of the module docstring, in order."""
    handle_reconciliations(context, effects)
    handle_topic_deletions(context, effects)
    handle_membership(context, effects)
    handle_broker_additions(context)
    handle_broker_failures(context)
    handle_disk_failures(context, effects)
    handle_drained_brokers(context)
    handle_isr_conditions(context, effects)
    handle_isr_shrinks(context, effects)


def handle_reconciliations(context: BatchContext, effects: EventEffects) -> None:
    for found in effects.reconciled:
        parts = [f"topics {', '.join(found.topics)}" if found.topics else "",
                 f"{len(found.partitions)} partitions" if found.partitions else "",
                 f"brokers {', '.join(map(str, found.brokers))}" if found.brokers else ""]
        context.outbox.alert(
            "SnapshotReconciled", WARNING, f"snapshot-{found.snapshot_id}",
            f"snapshot {found.snapshot_id} no longer lists {'; '.join(p for p in parts if p)}: "
            "removed (an event telling it was lost)",
            {"snapshot_id": found.snapshot_id, "observed_at_ms": found.observed_at_ms,
             "topics": summarise(list(found.topics)),
             "partitions": summarise([str(tp) for tp in found.partitions]),
             "brokers": summarise([str(b) for b in found.brokers])})


def handle_topic_deletions(context: BatchContext, effects: EventEffects) -> None:
    recreated = set(effects.topics_recreated)
    for topic in sorted(set(effects.topics_deleted) | recreated):
        state = context.state
        dropped = sorted(tp for tp in state.reassignments if tp.topic == topic)
        proposals = {pid: replace(p, targets={tp: t for tp, t in p.targets.items() if tp.topic != topic})
                     for pid, p in state.proposals.items()}
        ended = compute_finished_work((state.reassignments[tp] for tp in dropped), state.cluster)
        context.state = state.with_records(dict.fromkeys(dropped)).with_changes(
            proposals=proposals, replication_meter=add_finished_work(state.replication_meter, ended))
        context.close_alerts(k for k in state.open_alerts
                             if k.split(":", 1)[-1].rsplit("-", 1)[0] == topic)
        what = "deleted and re-created (a new topic id)" if topic in recreated else "deleted"
        context.outbox.alert("TopicDeleted", WARNING, topic,
                             f"topic {topic} was {what}; {len(dropped)} reassignments of it dropped",
                             {"reassignments_dropped": len(dropped),
                              "partitions": summarise([str(tp) for tp in dropped])})


def handle_membership(context: BatchContext, effects: EventEffects) -> None:
    state = context.state
    cluster = state.cluster
    down = dict(state.broker_down_since_ms)
    added = dict(state.broker_added_at_ms)
    healed = set(state.healed_brokers)
    grace = context.policy.broker_failure_grace_seconds
    for broker_id, since in sorted(effects.went_down.items()):
        added.pop(broker_id, None)
        if cluster.broker(broker_id) is None or broker_id in down:
            continue  # forgotten (left the cluster empty), or already known down
        down[broker_id] = since
        context.outbox.alert("BrokerFailed", WARNING, broker_subject(broker_id),
                             f"broker {broker_id} is down; its replicas move to live brokers in "
                             f"{grace:.0f} s unless it comes back",
                             {"broker_id": broker_id, "down_since_ms": since, "grace_seconds": grace})
    held = {b for p in cluster.partitions() for b in p.replicas} if effects.came_up else set()
    for broker_id in sorted(set(effects.came_up)):
        if broker_id in down:
            since = down.pop(broker_id)
            was_healed = broker_id in healed
            healed.discard(broker_id)
            context.outbox.alert(
                "BrokerRecovered", INFO, broker_subject(broker_id),
                f"broker {broker_id} is back after {(context.now_ms - since) / 1000:.0f} s; "
                + ("its replicas had already been planned away" if was_healed
                   else "pending healing cancelled"),
                {"broker_id": broker_id, "healing_was_planned": str(was_healed).lower()})
        if not effects.first_view and broker_id not in held and cluster.broker(broker_id) is not None:
            # Holding nothing, it is an empty broker to rebalance onto, also when it comes back
            # from down: a new broker is first seen fenced when a poll falls in the second or two
            # KRaft keeps it fenced after registering, and a healed broker returns empty.
            # The grace runs from when the broker joined, not from this batch's latest event.
            added[broker_id] = effects.came_up[broker_id]
            context.outbox.alert("BrokerAdded", INFO, broker_subject(broker_id),
                                 f"broker {broker_id} joined empty; rebalancing onto it in "
                                 f"{context.policy.broker_add_grace_seconds:.0f} s",
                                 {"broker_id": broker_id})
    known = set(cluster.brokers_by_id)
    context.state = state.with_changes(
        broker_down_since_ms={b: t for b, t in down.items() if b in known},
        broker_added_at_ms={b: t for b, t in added.items() if b in known},
        healed_brokers=frozenset(b for b in healed if b in known),
    )


def handle_broker_additions(context: BatchContext) -> None:
    state = context.state
    pending = state.broker_added_at_ms
    if not pending or context.now_ms - max(pending.values()) < context.policy.broker_add_grace_seconds * 1000:
        return
    ours = {b for r in state.reassignments.values() for b in r.final_target}
    held = {b for p in state.cluster.partitions() for b in p.replicas}
    new = sorted(b for b in pending
                 if (broker := state.cluster.broker(b)) is not None and broker.eligible
                 and (b not in held or b in ours))
    context.state = state.with_changes(broker_added_at_ms={})
    if not new:
        return
    reason = f"broker{'s' if len(new) > 1 else ''} {', '.join(map(str, new))} added"
    plan_id = context.next_plan_id(REBALANCE_PLAN_KIND)
    _plan_or_alert(context, plan_id, Goal(heal=False, rebalance=True), reason,
                   subject=broker_subject(new[0]))


def handle_broker_failures(context: BatchContext) -> None:
    state = context.state
    grace_ms = context.policy.broker_failure_grace_seconds * 1000
    due = sorted(b for b, since in state.broker_down_since_ms.items()
                 if b not in state.healed_brokers and context.now_ms - since >= grace_ms)
    if not due:
        return
    down = sorted(b.id for b in state.cluster.brokers if not b.alive)
    total = len(state.cluster.brokers)
    limit, fraction = context.policy.self_healing_max_failed_brokers, context.policy.self_healing_max_failed_fraction
    if len(down) > limit or (total and len(down) / total >= fraction):
        if context.open_alert("SelfHealingSuppressed:" + ",".join(map(str, down))):
            context.outbox.alert(
                "SelfHealingSuppressed", CRITICAL, "cluster",
                f"{len(down)} of {total} brokers are down ({down}): more than "
                f"{limit} or at least {fraction:.0%}; not moving replicas, a human must look",
                {"down_brokers": ",".join(map(str, down)), "brokers": total,
                 "max_failed_brokers": limit, "max_failed_fraction": fraction})
        return
    context.close_alerts(k for k in state.open_alerts if k.startswith("SelfHealingSuppressed:"))
    due_set = set(due)
    reason = f"broker{'s' if len(due) > 1 else ''} {', '.join(map(str, due))} failed"
    plan_id = context.next_plan_id("heal")
    _plan_or_alert(context, plan_id, Goal(heal=True, rebalance=False, partial=True), reason,
                   subject=broker_subject(due[0]),
                   keep=lambda tp: bool(due_set & set(state.cluster.partition(tp).replicas)))
    context.state = context.state.with_changes(healed_brokers=context.state.healed_brokers | due_set)


def handle_disk_failures(context: BatchContext, effects: EventEffects) -> None:
    """DiskFailed and a heal of the replicas a failed dir held; and, in later batches, a heal
    of any replica Kafka reports offline on a live broker with a failed dir that the failure's
    batch did not know of (`_handle_late_offline_replicas`)."""
    if not effects.dirs_failed:
        _handle_late_offline_replicas(context, effects)
        return
    cluster = context.state.cluster
    failed = set(effects.dirs_failed)
    hit = {}
    failed_brokers = {b for b, _ in failed}
    for p in cluster.partitions():
        for b in p.replicas:
            if (b, p.log_dir_of(b)) in failed:
                hit.setdefault((b, p.log_dir_of(b)), []).append(p.tp)
            elif b in failed_brokers and b in p.offline_replicas:
                # Kafka says the replica is offline on a live broker one of whose dirs failed: it
                # sits in the failed dir (with several, the first one), whatever dir we last
                # learnt. We may never have learnt it (Kafka describes an offline dir with no
                # replicas), or learnt it a moment too early: a log-dir move into the dir that
                # completed just before it failed (CI, 2026-11-30: orders-10 moved into data-0
                # 0.5 s before the dir went, still known in data-1, never healed).
                path = min(path for broker, path in failed if broker == b)
                hit.setdefault((b, path), []).append(p.tp)
    for broker_id, path in sorted(failed):
        tps = sorted(hit.get((broker_id, path), []))
        context.outbox.alert("DiskFailed", ERROR, broker_subject(broker_id),
                             f"log dir {path} on broker {broker_id} is offline; "
                             f"{len(tps)} replicas in it are offline and will be re-replicated",
                             {"broker_id": broker_id, "path": path, "replicas": len(tps),
                              "partitions": summarise([str(tp) for tp in tps])})
    if hit:
        dirs = ", ".join(f"{path} on broker {b}" for b, path in sorted(failed))
        _heal_dir_replicas(context, hit, f"log dir {dirs} failed", sorted(failed)[0][0])


def _handle_late_offline_replicas(context: BatchContext, effects: EventEffects) -> None:
    """A replica Kafka reports offline, in a batch after its dir's failure, on a live broker
    with an offline dir: the partition's event came after the dir's (they travel on different
    topics), or Kafka took the replica offline later. It is in the failed dir, and healed as
    the failure's replicas were, once: it joins the broker's `cannot_host`. Only the batch's
    changed partitions are looked at."""
    cluster = context.state.cluster
    hit: dict[tuple[int, str], list[TopicPartition]] = {}
    for tp in sorted(effects.touched):
        p = cluster.partition(tp)
        if p is None or not p.offline_replicas or tp in context.state.reassignments:
            continue
        for b in p.offline_replicas:
            broker = cluster.broker(b)
            if broker is None or not broker.alive or tp in broker.cannot_host:
                continue
            offline = sorted(d.path for d in broker.log_dirs if not d.online)
            if offline:
                hit.setdefault((b, offline[0]), []).append(tp)
    if hit:
        dirs = ", ".join(f"{path} on broker {b}" for b, path in sorted(hit))
        count = len({tp for tps in hit.values() for tp in tps})
        _heal_dir_replicas(context, hit, f"{count} more replicas found offline in log dir {dirs}", sorted(hit)[0][0])


def _heal_dir_replicas(context: BatchContext, hit: dict, reason: str, broker_id: int) -> None:
    """Rule 4's heal of the replicas failed dirs held (`hit`: (broker, dir) -> partitions): kept
    off their brokers until they restart (`_remember_cannot_host`), and re-replicated at once."""
    affected = {tp for tps in hit.values() for tp in tps}
    _remember_cannot_host(context, hit)
    plan_id = context.next_plan_id("disk")
    _plan_or_alert(context, plan_id, Goal(heal=True, rebalance=False, partial=True), reason,
                   subject=broker_subject(broker_id), keep=lambda tp: tp in affected)


def _remember_cannot_host(context: BatchContext, hit: dict) -> None:
    """Until it restarts, Kafka will not host again on a broker a partition its failed dir held."""
    cluster = context.state.cluster
    held: dict[int, set] = {}
    for (broker_id, _), tps in hit.items():
        held.setdefault(broker_id, set()).update(tps)
    brokers = [replace(b, cannot_host=b.cannot_host | frozenset(held[b.id])) if b.id in held else b
               for b in cluster.brokers]
    context.state = context.state.with_cluster(cluster.with_brokers(brokers))


def handle_drained_brokers(context: BatchContext) -> None:
    state = context.state
    draining = [b.id for b in state.cluster.brokers if b.draining]
    if not draining:
        return
    # The replica counts are carried from batch to batch; the reassignments are looked at only
    # for a draining broker that holds nothing and was not told yet (a drain's last moments).
    holding = dict(state.cluster.replica_count_by_broker)
    canary = state.cluster.topics_by_name.get(compute_canary_topic(context.policy))
    for partition in canary.partitions if canary is not None else ():  # the watcher moves those
        for b in partition.replicas:
            holding[b] = holding.get(b, 0) - 1
    empty = [b for b in draining if not holding.get(b) and f"BrokerDrained:{b}" not in state.open_alerts]
    if not empty:
        return
    targeted = {b for r in state.reassignments.values() for b in r.final_target}
    for broker_id in empty:
        if broker_id not in targeted and context.open_alert(f"BrokerDrained:{broker_id}"):
            context.outbox.alert("BrokerDrained", INFO, broker_subject(broker_id),
                                 f"broker {broker_id} holds no replica any more; it can be removed",
                                 {"broker_id": broker_id})


def handle_isr_shrinks(context: BatchContext, effects: EventEffects) -> None:
    """Count the ISR shrinks of partitions nothing moves, per broker (`planning.movement.
    isr_shrinks`): Kafka showed no reassignment (`EventEffects.isr_lost`), and neither the
    product nor another tool has one in flight for them."""
    state = context.state
    losses = [(broker, at if at is not None else context.now_ms)
              for tp, brokers, at in effects.isr_lost
              if tp not in state.reassignments and tp not in state.external_moves
              for broker in brokers]
    window = add_isr_shrinks(state.isr_shrinks, losses, context.now_ms)
    if window is not state.isr_shrinks:
        context.state = state.with_changes(isr_shrinks=window)


def handle_isr_conditions(context: BatchContext, effects: EventEffects) -> None:
    """UnderMinIsr and OfflinePartitions alerts, once per partition when the condition starts,
    closed when it ends. Eligible leader replicas (KIP-966) hold every committed record though
    out of the ISR: a leaderless partition with some gets a clean leader back as soon as one of
    their brokers returns, one with none needs an ISR member back (or an unclean election, which
    loses data); the alerts say which."""
    cluster = context.state.cluster
    started: dict[tuple[str, str], list[TopicPartition]] = {}
    ended: list[str] = []
    for tp in sorted(effects.touched):
        p = cluster.partition(tp)
        conditions = {
            "UnderMinIsr": p is not None and len(p.isr) < cluster.min_isr(tp.topic),
            "OfflinePartitions": p is not None and p.leader is None,
        }
        for kind, holds in conditions.items():
            key = f"{kind}:{tp}"
            if holds and context.open_alert(key):
                started.setdefault((kind, tp.topic), []).append(tp)
            elif not holds:
                ended.append(key)
    context.close_alerts(ended)
    for (kind, topic), tps in sorted(started.items()):
        eligible = [str(tp) for tp in tps if (p := cluster.partition(tp)) is not None and p.eligible_leaders]
        if kind == "UnderMinIsr":
            message = (f"{len(tps)} partitions of {topic} have fewer in-sync replicas than "
                       f"min.insync.replicas = {cluster.min_isr(topic)}")
            if eligible:
                message += f"; {len(eligible)} of them keep eligible leader replicas (every committed record)"
            severity = ERROR
        else:
            message = f"{len(tps)} partitions of {topic} have no leader"
            if eligible:
                message += (f"; {len(eligible)} of them keep eligible leader replicas and get a clean leader "
                            f"when one of their brokers is back; {len(tps) - len(eligible)} need an in-sync "
                            "replica back")
            severity = CRITICAL
        details: dict = {"count": len(tps), "partitions": summarise([str(tp) for tp in tps])}
        if eligible:
            details |= {"with_eligible_leaders": len(eligible), "eligible_partitions": summarise(eligible)}
        context.outbox.alert(kind, severity, topic, message, details)


def _plan_or_alert(context: BatchContext, plan_id: str, goal: Goal, reason: str, subject: str,
                   keep=None) -> None:
    """Plan `goal`, then hand it to `handle_plan`; an infeasible plan raises `PlanInfeasible`
    (with `goal.partial`: only for the partitions left out, after the last resort, see HEALS)."""
    try:
        plan, targets, dirs = compute_plan(context.state, context.policy, goal, keep)
    except ReassignerError as error:
        context.outbox.alert("PlanInfeasible", ERROR, subject, f"{reason}: no plan: {error}",
                             {"plan_id": plan_id, "error_code": error.code})
        return
    left_out = {tp: why for tp, why in plan.infeasible.items() if keep is None or keep(tp)}
    if left_out:
        targets, dirs = _heal_left_out(context, plan_id, goal, reason, subject, left_out,
                                       dict(targets), dict(dirs))
    handle_plan(context, plan_id, targets, reason, subject, target_log_dirs=dirs,
                details=compute_plan_proof(plan))


def _heal_left_out(context: BatchContext, plan_id: str, goal: Goal, reason: str, subject: str,
                   left_out: dict, targets: dict, dirs: dict) -> tuple[dict, dict]:
    """The last resort for the partitions a partial plan left out (see HEALS); alerts for them."""
    cluster = context.state.cluster
    starved = {tp for tp in left_out
               if (p := cluster.partition(tp)) is not None and len(p.isr) < cluster.min_isr(tp.topic)}
    relaxed: dict = {}
    if starved:
        try:
            _, relaxed, relaxed_dirs = compute_plan(context.state, context.policy, replace(goal, ignore_racks=True),
                                                    lambda tp: tp in starved)
        except ReassignerError:
            relaxed, relaxed_dirs = {}, {}
        targets.update(relaxed)
        dirs.update(relaxed_dirs)
    if relaxed:
        context.outbox.alert(
            "PlanInfeasible", WARNING, subject,
            f"{reason}: {len(relaxed)} partitions cannot be healed with rack spread and have fewer "
            "in-sync replicas than min.insync.replicas; healed without rack spread (last resort: "
            "a rebalance restores the spread once the brokers allow it)",
            {"plan_id": plan_id, "error_code": "PLAN_INFEASIBLE", "rack_spread_relaxed": len(relaxed),
             "partitions": summarise([str(tp) for tp in sorted(relaxed)])})
    still = sorted(tp for tp in left_out if tp not in relaxed)
    if still:
        context.outbox.alert(
            "PlanInfeasible", ERROR, subject,
            f"{reason}: {len(still)} partitions cannot be healed without breaking rack spread and "
            f"stay as they are ({left_out[still[0]]}); every other partition is healed",
            {"plan_id": plan_id, "error_code": "PLAN_INFEASIBLE", "left_out": len(still),
             "partitions": summarise([str(tp) for tp in still])})
    return targets, dirs
